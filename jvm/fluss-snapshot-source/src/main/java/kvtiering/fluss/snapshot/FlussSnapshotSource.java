package kvtiering.fluss.snapshot;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("fluss-snapshot")}: the rows of a Fluss primary-key table's KV
 * snapshots, one Spark partition per (bucket, snapshot), read on the executors.
 *
 * <p>Options ({@link SnapshotOptions}): {@code bootstrap.servers}, {@code database},
 * {@code table}, and {@code snapshot.<bucket>=<snapshot id>} for each bucket to read. The rows
 * have the table's columns ({@link SparkRows} maps their types) and an int {@code __bucket}: the
 * bucket the row was read from, so a caller can group by bucket without knowing Fluss's hash.
 *
 * <p>Failure modes: bad options, a partitioned table or a column type with no exact Spark
 * counterpart fail on the driver, naming the option, table or column; a snapshot that is gone
 * (never taken, or deleted since planning: only a lease keeps it) fails the task naming table,
 * bucket and snapshot; so does a table whose schema changed between planning and reading. A read
 * never returns fewer rows than the snapshot holds.
 */
public final class FlussSnapshotSource implements TableProvider, DataSourceRegister {

    public static final String SHORT_NAME = "fluss-snapshot";

    @Override
    public String shortName() {
        return SHORT_NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        SnapshotOptions parsed = SnapshotOptions.parse(options);
        return SparkRows.schema(parsed.tablePath(), parsed.describe().getRowType());
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        SnapshotOptions options = SnapshotOptions.parse(new CaseInsensitiveStringMap(properties));
        return new SnapshotTable(options, options.describe().getTableId(), schema);
    }
}
