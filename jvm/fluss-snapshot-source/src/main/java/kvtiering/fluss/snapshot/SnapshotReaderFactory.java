package kvtiering.fluss.snapshot;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;

/** Shipped to the executors: what each task needs to open its bucket's snapshot there. */
record SnapshotReaderFactory(SnapshotOptions options, long tableId, StructType schema)
        implements PartitionReaderFactory {

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        return new BucketSnapshotReader(options, tableId, schema, (BucketSnapshot) partition);
    }
}
