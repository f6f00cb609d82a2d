"""Entry points that ``spark-submit`` runs as files: ``tiering_job.py`` (``tiering submit`` finds it).

This folder holds nothing else: spark-submit puts a script's own folder first on the driver's
``sys.path``, where a module here would shadow a top-level one of the same name.
"""
