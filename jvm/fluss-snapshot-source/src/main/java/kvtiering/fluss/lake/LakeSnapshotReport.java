package kvtiering.fluss.lake;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.FlussConnection;
import org.apache.fluss.rpc.gateway.CoordinatorGateway;
import org.apache.fluss.rpc.messages.CommitLakeTableSnapshotRequest;
import org.apache.fluss.rpc.messages.CommitLakeTableSnapshotResponse;
import org.apache.fluss.rpc.messages.PbBucketOffset;
import org.apache.fluss.rpc.messages.PbCommitLakeTableSnapshotRespForTable;
import org.apache.fluss.rpc.messages.PbLakeTableOffsetForBucket;
import org.apache.fluss.rpc.messages.PbLakeTableSnapshotInfo;
import org.apache.fluss.rpc.messages.PbLakeTableSnapshotMetadata;
import org.apache.fluss.rpc.messages.PbPrepareLakeTableRespForTable;
import org.apache.fluss.rpc.messages.PbTableOffsets;
import org.apache.fluss.rpc.messages.PrepareLakeTableSnapshotRequest;
import org.apache.fluss.rpc.messages.PrepareLakeTableSnapshotResponse;
import org.apache.fluss.rpc.protocol.ApiError;

/**
 * Tables' lake progress told to Fluss's coordinator in one report (tiering/fluss/lake_progress.py):
 * per table the lake's snapshot id (a Delta version) and, per bucket, the exclusive log offset the
 * lake holds. Fluss reads it back as the table's lake snapshot ({@code Admin.getLatestLakeSnapshot}).
 *
 * <p>It goes through Fluss's internal coordinator calls, the two steps Fluss's own tiering
 * committer makes: {@code prepareLakeTableSnapshot} (the coordinator writes each table's bucket
 * offsets to a file under its remote data directory and answers the file's path), then {@code
 * commitLakeTableSnapshot} (the snapshot id with that path, and the offsets for the tablet
 * servers). Internal API, built for Fluss 0.9.1's messages: a release that changes them fails the
 * report, never the caller's round.
 *
 * <p>A py4j caller adds tables with primitive arrays (nothing boxed on the Python side) and sends
 * once. The outcome is a future, never a thrown exception (a py4j caller in a process that holds a
 * SparkContext reads thrown Java exceptions through Spark's JVM): it holds, in the order the tables
 * were added, each table's refusal, null for a table stored; it fails as a whole only when a call
 * did (the coordinator unreachable).
 */
public final class LakeSnapshotReport {

    private record Table(String name, long tableId, long snapshotId, int[] buckets, long[] offsets) {}

    private final String database;
    private final List<Table> tables = new ArrayList<>();

    public LakeSnapshotReport(String database) {
        this.database = database;
    }

    /** Adds table {@code name}'s progress: {@code offsets[i]} is bucket {@code buckets[i]}'s. */
    public LakeSnapshotReport add(String name, long tableId, long snapshotId, int[] buckets, long[] offsets) {
        if (buckets.length != offsets.length) {
            throw new IllegalArgumentException(
                    "table " + name + ": " + buckets.length + " buckets for " + offsets.length + " offsets");
        }
        tables.add(new Table(name, tableId, snapshotId, buckets.clone(), offsets.clone()));
        return this;
    }

    /** Sends the tables added, prepare then commit; see the class doc for the future's value. */
    public CompletableFuture<List<Throwable>> send(Connection connection) {
        try {
            CoordinatorGateway coordinator =
                    ((FlussConnection) connection).getMetadataUpdater().newCoordinatorServerClient();
            return coordinator
                    .prepareLakeTableSnapshot(prepareRequest())
                    .thenCompose(prepared -> commit(coordinator, prepared));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private PrepareLakeTableSnapshotRequest prepareRequest() {
        PrepareLakeTableSnapshotRequest request = new PrepareLakeTableSnapshotRequest();
        for (Table table : tables) {
            PbTableOffsets offsets = request.addBucketOffset().setTableId(table.tableId());
            offsets.setTablePath().setDatabaseName(database).setTableName(table.name());
            for (int i = 0; i < table.buckets().length; i++) {
                PbBucketOffset bucket = offsets.addBucketOffset();
                bucket.setBucketId(table.buckets()[i]).setLogEndOffset(table.offsets()[i]);
            }
        }
        return request;
    }

    /** Commits the tables whose offsets the coordinator stored; the others keep its refusal. */
    private CompletableFuture<List<Throwable>> commit(
            CoordinatorGateway coordinator, PrepareLakeTableSnapshotResponse prepared) {
        Map<Long, Throwable> refused = new HashMap<>();
        Map<Long, String> paths = new HashMap<>();
        for (PbPrepareLakeTableRespForTable answer : prepared.getPrepareLakeTableRespsList()) {
            if (answer.hasErrorCode()) {
                refused.put(answer.getTableId(), ApiError.fromErrorMessage(answer).exception());
            } else {
                paths.put(answer.getTableId(), answer.getLakeTableOffsetsPath());
            }
        }
        CommitLakeTableSnapshotRequest request = new CommitLakeTableSnapshotRequest();
        for (Table table : tables) {
            String path = paths.get(table.tableId());
            if (path == null) {
                refused.putIfAbsent(table.tableId(), new IllegalStateException(
                        "Fluss's coordinator answered no lake offsets file for table " + table.name()));
                continue;
            }
            PbLakeTableSnapshotMetadata metadata = request.addLakeTableSnapshotMetadata();
            metadata.setTableId(table.tableId()).setSnapshotId(table.snapshotId());
            metadata.setTieredBucketOffsetsFilePath(path).setReadableBucketOffsetsFilePath(path);
            PbLakeTableSnapshotInfo info =
                    request.addTablesReq().setTableId(table.tableId()).setSnapshotId(table.snapshotId());
            for (int i = 0; i < table.buckets().length; i++) {
                PbLakeTableOffsetForBucket bucket = info.addBucketsReq();
                bucket.setBucketId(table.buckets()[i]).setLogEndOffset(table.offsets()[i]);
            }
        }
        if (request.getLakeTableSnapshotMetadatasCount() == 0) {
            return CompletableFuture.completedFuture(inOrder(refused));
        }
        return coordinator.commitLakeTableSnapshot(request).thenApply(committed -> {
            collectRefusals(committed, refused);
            return inOrder(refused);
        });
    }

    private static void collectRefusals(CommitLakeTableSnapshotResponse committed, Map<Long, Throwable> refused) {
        for (PbCommitLakeTableSnapshotRespForTable answer : committed.getTableRespsList()) {
            if (answer.hasErrorCode()) {
                refused.put(answer.getTableId(), ApiError.fromErrorMessage(answer).exception());
            }
        }
    }

    private List<Throwable> inOrder(Map<Long, Throwable> refused) {
        List<Throwable> answers = new ArrayList<>(tables.size());
        for (Table table : tables) {
            answers.add(refused.get(table.tableId()));
        }
        return answers;
    }
}
