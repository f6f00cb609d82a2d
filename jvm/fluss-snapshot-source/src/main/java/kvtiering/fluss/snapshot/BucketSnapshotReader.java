package kvtiering.fluss.snapshot;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.batch.BatchScanner;
import org.apache.fluss.metadata.TableBucket;
import org.apache.fluss.metadata.TableInfo;
import org.apache.fluss.utils.CloseableIterator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;

/**
 * One task's read, on an executor: its own connection, the bucket's {@code
 * KvSnapshotBatchScanner} (it downloads the snapshot's RocksDB files and iterates them), each
 * Fluss row converted to a Spark row as it is handed out.
 *
 * <p>Everything opened is closed in {@link #close()}, in reverse order, also when opening fails
 * halfway (Spark closes only a reader it was given). A gone snapshot, another table under the
 * same name or a changed schema fail the task in one line naming table, bucket and snapshot.
 */
final class BucketSnapshotReader implements PartitionReader<InternalRow> {

    /** How long one poll waits for the snapshot's files; an empty batch means "not yet". */
    private static final Duration POLL = Duration.ofSeconds(5);

    private final Deque<AutoCloseable> opened = new ArrayDeque<>();
    private final String split;
    private final int bucket;
    private final SparkRows rows;
    private final BatchScanner scanner;
    private CloseableIterator<org.apache.fluss.row.InternalRow> batch;
    private InternalRow current;
    private boolean finished;

    BucketSnapshotReader(SnapshotOptions options, long tableId, StructType schema, BucketSnapshot snapshot) {
        bucket = snapshot.bucket();
        split = options.tablePath() + " bucket " + bucket + " snapshot " + snapshot.snapshotId();
        try {
            Connection connection = open(options.connect());
            Table table = open(connection.getTable(options.tablePath()));
            TableInfo info = table.getTableInfo();
            if (info.getTableId() != tableId) {
                throw new IllegalStateException("fluss-snapshot read of " + split + ": the table was dropped and"
                        + " created again since the read was planned (table id " + tableId + ", now "
                        + info.getTableId() + ")");
            }
            StructType now = SparkRows.schema(options.tablePath(), info.getRowType());
            if (!now.equals(schema)) {
                throw new IllegalStateException("fluss-snapshot read of " + split + ": the table's schema changed"
                        + " since the read was planned: " + schema.simpleString() + " -> " + now.simpleString());
            }
            rows = SparkRows.of(options.tablePath(), info.getRowType());
            scanner = open(SnapshotScanners.open(
                    table, new TableBucket(tableId, bucket), snapshot.snapshotId(), "fluss-snapshot read of " + split));
        } catch (RuntimeException e) {
            closeQuietly(e);
            throw e;
        }
    }

    @Override
    public boolean next() throws IOException {
        while (!finished) {
            if (batch != null && batch.hasNext()) {
                current = rows.convert(batch.next(), bucket);
                return true;
            }
            if (batch != null) {
                batch.close();
                batch = null;
            }
            batch = scanner.pollBatch(POLL);
            finished = batch == null;
        }
        return false;
    }

    @Override
    public InternalRow get() {
        return current;
    }

    @Override
    public void close() throws IOException {
        if (batch != null) {
            batch.close();
            batch = null;
        }
        IOException failed = null;
        while (!opened.isEmpty()) {
            try {
                opened.pop().close();
            } catch (Exception e) {
                if (failed == null) {
                    failed = new IOException("fluss-snapshot read of " + split + ": closing failed", e);
                } else {
                    failed.addSuppressed(e);
                }
            }
        }
        if (failed != null) {
            throw failed;
        }
    }

    private <T extends AutoCloseable> T open(T resource) {
        opened.push(resource);
        return resource;
    }

    private void closeQuietly(RuntimeException cause) {
        try {
            close();
        } catch (IOException e) {
            cause.addSuppressed(e);
        }
    }
}
