package kvtiering.fluss.snapshot;

import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.batch.BatchScanner;
import org.apache.fluss.exception.KvSnapshotNotExistException;
import org.apache.fluss.metadata.TableBucket;

/**
 * A bucket's KV snapshot opened for reading ({@code KvSnapshotBatchScanner}: it downloads the
 * snapshot's RocksDB files and iterates them), shared by the Spark source and the Arrow writer.
 * Neither uses Spark here: the Arrow writer runs in a JVM that has only fluss-client and this jar.
 */
final class SnapshotScanners {

    private SnapshotScanners() {}

    /**
     * The bucket's scanner at {@code snapshotId}; a snapshot that does not exist fails naming
     * {@code split} (table, bucket and snapshot), Fluss's {@link KvSnapshotNotExistException}
     * kept as the cause so a caller can tell it from other failures.
     */
    static BatchScanner open(Table table, TableBucket bucket, long snapshotId, String split) {
        try {
            return table.newScan().createBatchScanner(bucket, snapshotId);
        } catch (RuntimeException e) {
            for (Throwable cause = e; cause != null; cause = cause.getCause()) {
                if (cause instanceof KvSnapshotNotExistException) {
                    throw new IllegalStateException(split + ": the snapshot does not exist (not taken yet, or"
                            + " deleted since: only a lease keeps it)", e);
                }
            }
            throw e;
        }
    }
}
