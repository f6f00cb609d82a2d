package kvtiering.fluss.snapshot;

import java.util.EnumSet;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The planned read: the table (by id, as planning saw it), its Spark schema and the (bucket,
 * snapshot) pairs. It is its own scan builder, scan and batch: nothing is pushed down, since a
 * snapshot split is read whole.
 */
final class SnapshotTable implements SupportsRead, ScanBuilder, Scan, Batch {

    private final SnapshotOptions options;
    private final long tableId;
    private final StructType schema;

    SnapshotTable(SnapshotOptions options, long tableId, StructType schema) {
        this.options = options;
        this.tableId = tableId;
        this.schema = schema;
    }

    @Override
    public String name() {
        return options.tablePath().toString();
    }

    @Override
    @SuppressWarnings("deprecation") // Table.schema(): the one both Spark 4.0 and 4.3 call
    public StructType schema() {
        return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
        return EnumSet.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
        return this;
    }

    @Override
    public Scan build() {
        return this;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        return FlussSnapshotSource.SHORT_NAME + " " + options.tablePath() + " " + options.snapshots();
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    /** One partition per bucket, in bucket order: a bucket's snapshot is one task's read. */
    @Override
    public InputPartition[] planInputPartitions() {
        return options.snapshots().entrySet().stream()
                .map(entry -> new BucketSnapshot(entry.getKey(), entry.getValue()))
                .toArray(InputPartition[]::new);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new SnapshotReaderFactory(options, tableId, schema);
    }
}
