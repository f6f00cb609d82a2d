"""The floor of a spark-submit to the cluster: a SparkSession, a count of 10 rows on the executors, exit.

    spark-submit --master spark://HOST:PORT benchmarks/cluster_floor_job.py

``bench_cluster.py`` sets the service's time to its first Delta commit against this: what any
PySpark job pays before it has done anything (spark-submit's JVM, the Python driver, the
SparkContext, executors registering, one job's tasks) is not the service's to save.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

if __name__ == "__main__":
    spark = SparkSession.builder.appName("kv-tiering-floor").getOrCreate()
    assert spark.createDataFrame([(i,) for i in range(10)], "id int").count() == 10
    spark.stop()
