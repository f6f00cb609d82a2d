package kvtiering.fluss.snapshot;

import java.io.FileOutputStream;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.batch.BatchScanner;
import org.apache.fluss.metadata.TableBucket;
import org.apache.fluss.metadata.TableInfo;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.shaded.arrow.org.apache.arrow.memory.BufferAllocator;
import org.apache.fluss.shaded.arrow.org.apache.arrow.memory.RootAllocator;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.fluss.utils.CloseableIterator;

/**
 * One bucket's KV snapshot written as an Arrow IPC file (the file format: a reader maps it and
 * reads its batches in place), for a Python caller through py4j (tiering/fluss/snapshot_arrow.py).
 * The rows cross into Python as a few large batches instead of one py4j call per field.
 *
 * <p>It needs only fluss-client (whose shaded Arrow it writes with) and this jar: a gateway JVM
 * started by Python runs it. The outcome is a future, completed before it is returned, never a
 * thrown exception: a py4j caller in a process that holds a SparkContext reads thrown Java
 * exceptions through Spark's JVM. Failure modes: a gone snapshot fails naming table, bucket and
 * snapshot, Fluss's {@code KvSnapshotNotExistException} among its causes; a table dropped and
 * created again since planning (another table id) and a column type the lake cannot hold fail in
 * one line naming them. A failed write leaves a partial file, which the caller removes.
 */
public final class ArrowSnapshotWriter {

    /** How long one poll waits for the snapshot's files; an empty batch means "not yet". */
    private static final Duration POLL = Duration.ofSeconds(5);
    /** Rows per Arrow record batch: a few MB for a row of tens of bytes, bounded memory per bucket. */
    private static final int BATCH_ROWS = 65_536;

    /** The table under the path has another id than the one planned: it was re-created. */
    public static final class TableRecreatedException extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        TableRecreatedException(String message) {
            super(message);
        }
    }

    private ArrowSnapshotWriter() {}

    /**
     * Writes the rows of snapshot {@code snapshotId} of bucket {@code bucket} of {@code
     * database.table} (table id {@code tableId}) to {@code file}; the future holds the row count,
     * or the failure.
     */
    public static CompletableFuture<Long> write(
            Connection connection, String database, String table, long tableId, int bucket, long snapshotId,
            String file) {
        TablePath path = TablePath.of(database, table);
        String split = "Arrow snapshot of " + path + " bucket " + bucket + " snapshot " + snapshotId;
        try {
            return CompletableFuture.completedFuture(written(connection, path, tableId, bucket, snapshotId, file, split));
        } catch (IOException | RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private static long written(
            Connection connection, TablePath path, long tableId, int bucket, long snapshotId, String file,
            String split) throws IOException {
        try (Table table = connection.getTable(path)) {
            TableInfo info = table.getTableInfo();
            if (info.getTableId() != tableId) {
                throw new TableRecreatedException(split + ": the table was dropped and created again since the"
                        + " read was planned (table id " + tableId + ", now " + info.getTableId() + ")");
            }
            try (BatchScanner scanner = SnapshotScanners.open(table, new TableBucket(tableId, bucket), snapshotId, split);
                    BufferAllocator allocator = new RootAllocator();
                    VectorSchemaRoot root =
                            VectorSchemaRoot.create(ArrowRows.schema(path, info.getRowType()), allocator);
                    FileOutputStream out = new FileOutputStream(file);
                    ArrowFileWriter writer = new ArrowFileWriter(root, null, out.getChannel())) {
                ArrowRows rows = ArrowRows.into(root, path, info.getRowType());
                writer.start();
                long total = 0;
                int filled = 0;
                root.allocateNew();
                for (CloseableIterator<InternalRow> batch = scanner.pollBatch(POLL);
                        batch != null;
                        batch = scanner.pollBatch(POLL)) {
                    try (CloseableIterator<InternalRow> polled = batch) {
                        while (polled.hasNext()) {
                            rows.write(polled.next(), filled++);
                            if (filled == BATCH_ROWS) {
                                total += flush(root, writer, filled);
                                filled = 0;
                            }
                        }
                    }
                }
                if (filled > 0) {
                    total += flush(root, writer, filled);
                }
                writer.end();
                return total;
            }
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) { // Table.close() and BatchScanner.close() declare Exception
            throw new IOException(split + ": closing failed", e);
        }
    }

    /** The filled rows written as one record batch; the vectors emptied for the next. */
    private static int flush(VectorSchemaRoot root, ArrowFileWriter writer, int filled) throws IOException {
        root.setRowCount(filled);
        writer.writeBatch();
        root.allocateNew();
        return filled;
    }
}
