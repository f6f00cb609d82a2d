"""Every helper the tests share, one module per role; test modules import from here, from
``tests.fixtures`` (pytest fixtures, registered in ``tests/conftest.py``) and their conftest,
never from one another.

- :mod:`.config`: the one ``write_conf`` (a TOML file for the CLI) and ``make_config`` (in-process;
  ``job_config`` at the service's own pace, for the benchmarks);
- :mod:`.waiting`: the one ``wait_until``;
- :mod:`.drivers`: real ``tiering`` processes: the one ``Driver``, ``run_driver``, ``tiering_cli``;
- :mod:`.oracle`: ``TableOracle``, the test's own record of a table, and the lake compared with it;
- :mod:`.lake`: what a lake holds beside its rows: tiering commits, orphan files, the change feed;
- :mod:`.running`: a job running in-process while the test writes and breaks things;
- :mod:`.store`: the store's side: table specs, GC passes, leases, memory;
- :mod:`.store_files`: snapshot and log files laid out as the store writes them;
- :mod:`.writers`: the round writers under test, by data path, and their ``orders`` table;
- :mod:`.names`: table and column names the store accepts or refuses;
- :mod:`.contender`: a leader process (``python -m tests.support.contender``).
"""
