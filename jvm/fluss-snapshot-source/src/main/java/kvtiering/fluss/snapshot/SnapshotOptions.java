package kvtiering.fluss.snapshot;

import java.io.Serializable;
import java.util.Locale;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.metadata.TableInfo;
import org.apache.fluss.metadata.TablePath;

/**
 * The options of a snapshot read, checked on the driver before any task starts: a missing or
 * malformed option fails the read there, in one line naming the option and what it expects.
 *
 * <p>{@code bootstrap.servers}, {@code database} and {@code table} name the Fluss table; one
 * {@code snapshot.<bucket>} option per bucket to read gives the KV snapshot id to read it at
 * (the pairs a round planned). At least one is required: a read of no bucket is a planning
 * error, not an empty table. Spark hands options over case-insensitively, lower-cased.
 */
public record SnapshotOptions(String bootstrapServers, TablePath tablePath, SortedMap<Integer, Long> snapshots)
        implements Serializable {

    public static final String BOOTSTRAP_SERVERS = "bootstrap.servers";
    public static final String DATABASE = "database";
    public static final String TABLE = "table";
    public static final String SNAPSHOT_PREFIX = "snapshot.";

    public static SnapshotOptions parse(Map<String, String> options) {
        SortedMap<Integer, Long> snapshots = new TreeMap<>();
        for (Map.Entry<String, String> option : options.entrySet()) {
            String key = option.getKey().toLowerCase(Locale.ROOT);
            if (key.startsWith(SNAPSHOT_PREFIX)) {
                int bucket = (int) number(option, key.substring(SNAPSHOT_PREFIX.length()), Integer.MAX_VALUE);
                snapshots.put(bucket, number(option, option.getValue(), Long.MAX_VALUE));
            }
        }
        TablePath path = TablePath.of(required(options, DATABASE), required(options, TABLE));
        if (snapshots.isEmpty()) {
            throw new IllegalArgumentException(
                    "fluss-snapshot read of " + path + ": no bucket to read: expected options snapshot.<bucket>=<snapshot id>");
        }
        return new SnapshotOptions(required(options, BOOTSTRAP_SERVERS), path, snapshots);
    }

    /** A connection to the cluster; the caller closes it. */
    public Connection connect() {
        return ConnectionFactory.createConnection(Configuration.fromMap(Map.of(BOOTSTRAP_SERVERS, bootstrapServers)));
    }

    /**
     * The table's metadata, from a connection opened and closed here; refuses a table this
     * source cannot read whole (partitioned: its buckets are per partition).
     */
    public TableInfo describe() {
        try (Connection connection = connect(); Table table = connection.getTable(tablePath)) {
            TableInfo info = table.getTableInfo();
            if (info.isPartitioned()) {
                throw new IllegalArgumentException(
                        "fluss-snapshot read of " + tablePath + ": partitioned tables are not supported");
            }
            return info;
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("fluss-snapshot read of " + tablePath + ": closing its connection failed", e);
        }
    }

    private static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null || value.isBlank()) {
            throw new IllegalArgumentException("fluss-snapshot read: option " + name + " is required");
        }
        return value;
    }

    /** ``text`` (a part of ``option``) as a number from 0 to ``max``, or a one-line error naming the option. */
    private static long number(Map.Entry<String, String> option, String text, long max) {
        try {
            long value = Long.parseLong(text.trim());
            if (value >= 0 && value <= max) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below, with the option
        }
        throw new IllegalArgumentException("fluss-snapshot read: option " + option.getKey() + "=" + option.getValue()
                + ": expected " + SNAPSHOT_PREFIX + "<bucket>=<snapshot id>, both non-negative integers");
    }
}
