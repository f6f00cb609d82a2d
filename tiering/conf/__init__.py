"""Typed configuration (docs/DESIGN.md §8): TOML file, then ``TIERING_<SECTION>_<KEY>`` environment, then
CLI overrides; validated strictly, every problem reported at once as one ConfigError.

Import what you need from its module (``tiering.conf.loader``, ``tiering.conf.model``,
``tiering.conf.defaults``): this package imports none of them, so a process that needs only the
defaults (a Spark Python worker writing a bucket) does not import the config models.
"""
