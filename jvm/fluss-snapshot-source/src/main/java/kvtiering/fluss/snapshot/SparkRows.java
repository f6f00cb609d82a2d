package kvtiering.fluss.snapshot;

import java.util.List;

import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.types.BinaryType;
import org.apache.fluss.types.CharType;
import org.apache.fluss.types.DataField;
import org.apache.fluss.types.DecimalType;
import org.apache.fluss.types.LocalZonedTimestampType;
import org.apache.fluss.types.RowType;
import org.apache.fluss.types.TimestampType;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.MetadataBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Fluss's column types as Spark's, and a Fluss row as a Spark row of them plus its bucket.
 *
 * <p>Every type a primary-key table can hold maps to a Spark type that holds its values
 * exactly: BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s) (p &lt;= 38),
 * CHAR(n) and STRING as string, BINARY(n) and BYTES as binary, DATE, TIMESTAMP(p) as
 * timestamp_ntz and TIMESTAMP_LTZ(p) as timestamp for p &lt;= 6 (Spark keeps microseconds), and
 * TIME(p) as an int of milliseconds since midnight (what Fluss stores; Spark 4.0 has no time
 * type). Each column's metadata keeps its Fluss type ({@value #FLUSS_TYPE}) so a TIME or a
 * CHAR(n) stays recognisable. Any other type (ARRAY, MAP, ROW, a timestamp finer than
 * microseconds) fails on the driver in one line naming the table and the column: a value is never
 * approximated.
 */
final class SparkRows {

    /** The column holding the bucket a row was read from. */
    static final String BUCKET_COLUMN = "__bucket";
    /** The column metadata key holding the column's Fluss type, e.g. {@code TIME(3)}. */
    static final String FLUSS_TYPE = "fluss.type";

    private static final int SPARK_MAX_PRECISION = 38;
    private static final int MICROS = 6;

    /** Reads a non-null field of a Fluss row as the value Spark's row holds for its type. */
    @FunctionalInterface
    private interface FieldReader {
        Object read(org.apache.fluss.row.InternalRow row);
    }

    private record Column(DataType type, FieldReader reader) {}

    private final FieldReader[] readers;

    private SparkRows(FieldReader[] readers) {
        this.readers = readers;
    }

    /** The Spark schema of the rows read from ``path``: its columns, then {@value #BUCKET_COLUMN}. */
    static StructType schema(TablePath path, RowType rowType) {
        List<DataField> fields = rowType.getFields();
        StructField[] columns = new StructField[fields.size() + 1];
        for (int pos = 0; pos < fields.size(); pos++) {
            DataField field = fields.get(pos);
            Metadata metadata = new MetadataBuilder().putString(FLUSS_TYPE, field.getType().asSummaryString()).build();
            columns[pos] = new StructField(
                    field.getName(), column(path, field, pos).type(), field.getType().isNullable(), metadata);
        }
        columns[fields.size()] = new StructField(BUCKET_COLUMN, DataTypes.IntegerType, false, Metadata.empty());
        return new StructType(columns);
    }

    static SparkRows of(TablePath path, RowType rowType) {
        List<DataField> fields = rowType.getFields();
        FieldReader[] readers = new FieldReader[fields.size()];
        for (int pos = 0; pos < readers.length; pos++) {
            readers[pos] = column(path, fields.get(pos), pos).reader();
        }
        return new SparkRows(readers);
    }

    /** A new Spark row: the values are copied out of ``row``, which the scanner reuses. */
    InternalRow convert(org.apache.fluss.row.InternalRow row, int bucket) {
        Object[] values = new Object[readers.length + 1];
        for (int pos = 0; pos < readers.length; pos++) {
            values[pos] = row.isNullAt(pos) ? null : readers[pos].read(row);
        }
        values[readers.length] = bucket;
        return new GenericInternalRow(values);
    }

    private static Column column(TablePath path, DataField field, int pos) {
        org.apache.fluss.types.DataType type = field.getType();
        return switch (type.getTypeRoot()) {
            case BOOLEAN -> new Column(DataTypes.BooleanType, row -> row.getBoolean(pos));
            case TINYINT -> new Column(DataTypes.ByteType, row -> row.getByte(pos));
            case SMALLINT -> new Column(DataTypes.ShortType, row -> row.getShort(pos));
            case INTEGER -> new Column(DataTypes.IntegerType, row -> row.getInt(pos));
            case BIGINT -> new Column(DataTypes.LongType, row -> row.getLong(pos));
            case FLOAT -> new Column(DataTypes.FloatType, row -> row.getFloat(pos));
            case DOUBLE -> new Column(DataTypes.DoubleType, row -> row.getDouble(pos));
            case DECIMAL -> decimal(path, field, (DecimalType) type, pos);
            case CHAR -> {
                int length = ((CharType) type).getLength();
                yield new Column(DataTypes.StringType, row -> UTF8String.fromBytes(row.getChar(pos, length).toBytes()));
            }
            case STRING -> new Column(DataTypes.StringType, row -> UTF8String.fromBytes(row.getString(pos).toBytes()));
            case BINARY -> {
                int length = ((BinaryType) type).getLength();
                yield new Column(DataTypes.BinaryType, row -> row.getBinary(pos, length));
            }
            case BYTES -> new Column(DataTypes.BinaryType, row -> row.getBytes(pos));
            case DATE -> new Column(DataTypes.DateType, row -> row.getInt(pos)); // days since 1970-01-01
            case TIME_WITHOUT_TIME_ZONE -> new Column(DataTypes.IntegerType, row -> row.getInt(pos));
            case TIMESTAMP_WITHOUT_TIME_ZONE -> {
                int precision = micros(path, field, ((TimestampType) type).getPrecision());
                yield new Column(
                        DataTypes.TimestampNTZType, row -> row.getTimestampNtz(pos, precision).toEpochMicros());
            }
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE -> {
                int precision = micros(path, field, ((LocalZonedTimestampType) type).getPrecision());
                yield new Column(DataTypes.TimestampType, row -> row.getTimestampLtz(pos, precision).toEpochMicros());
            }
            default -> throw unsupported(path, field, "Spark has no exact counterpart read here");
        };
    }

    private static Column decimal(TablePath path, DataField field, DecimalType type, int pos) {
        int precision = type.getPrecision();
        int scale = type.getScale();
        if (precision > SPARK_MAX_PRECISION) {
            throw unsupported(path, field, "Spark decimals hold at most " + SPARK_MAX_PRECISION + " digits");
        }
        return new Column(
                DataTypes.createDecimalType(precision, scale),
                row -> Decimal.apply(row.getDecimal(pos, precision, scale).toBigDecimal(), precision, scale));
    }

    private static int micros(TablePath path, DataField field, int precision) {
        if (precision > MICROS) {
            throw unsupported(path, field, "Spark timestamps hold microseconds, not " + precision + " fractional digits");
        }
        return precision;
    }

    private static IllegalArgumentException unsupported(TablePath path, DataField field, String why) {
        return new IllegalArgumentException("fluss-snapshot read of " + path + ": column " + field.getName()
                + " has type " + field.getType().asSummaryString() + ", which it cannot read: " + why);
    }
}
