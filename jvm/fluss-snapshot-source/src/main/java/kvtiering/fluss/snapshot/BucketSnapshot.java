package kvtiering.fluss.snapshot;

import org.apache.spark.sql.connector.read.InputPartition;

/** One Spark partition: the KV snapshot {@code snapshotId} of bucket {@code bucket}. */
record BucketSnapshot(int bucket, long snapshotId) implements InputPartition {}
