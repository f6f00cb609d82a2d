"""One round of the tiering query, from the batch's splits to every table's commit, report and release.

``committer`` runs a round (the query's ``foreachBatch``); ``table_round`` is one table's progress
through the explicit ``states``; ``outcome`` is what the round did, typed, for the job, the
metrics and the health file (``health``); ``deferred`` carries a committed table's report or
release that the store refused to the next round; ``batch_splits`` reads a batch's splits.
Modules are imported by name: nothing heavy is imported with the package.
"""
