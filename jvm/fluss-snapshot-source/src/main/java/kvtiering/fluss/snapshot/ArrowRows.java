package kvtiering.fluss.snapshot;

import java.util.ArrayList;
import java.util.List;

import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.BigIntVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.BitVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.DateDayVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.DecimalVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.FieldVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.Float4Vector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.Float8Vector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.IntVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.SmallIntVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.TimeStampVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.TinyIntVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.VarBinaryVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.VarCharVector;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.types.DateUnit;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.types.TimeUnit;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.types.pojo.Field;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.fluss.shaded.arrow.org.apache.arrow.vector.types.pojo.Schema;
import org.apache.fluss.types.BinaryType;
import org.apache.fluss.types.CharType;
import org.apache.fluss.types.DataField;
import org.apache.fluss.types.DataType;
import org.apache.fluss.types.DecimalType;
import org.apache.fluss.types.LocalZonedTimestampType;
import org.apache.fluss.types.RowType;
import org.apache.fluss.types.TimestampType;

/**
 * Fluss's column types as the Arrow types the lake gets (tiering/fluss/types.py maps the same),
 * and Fluss rows written into the vectors of a {@link VectorSchemaRoot} of them.
 *
 * <p>BOOLEAN, TINYINT..BIGINT, FLOAT, DOUBLE as themselves; DECIMAL(p, s) (p &lt;= 38) as
 * decimal128(p, s); CHAR(n) and STRING as utf8 (Fluss keeps a CHAR unpadded); BINARY(n) and BYTES
 * as binary; DATE as date32 (days); TIMESTAMP(p) as timestamp[us] without a zone (a wall clock) and
 * TIMESTAMP_LTZ(p) as timestamp[us, UTC] (an instant), for p &lt;= 6. Any other type (TIME: Delta has
 * none; ARRAY, MAP, ROW; a timestamp finer than microseconds) fails in one line naming the table
 * and the column, before a row is read: a value is never approximated. The Arrow classes are
 * fluss-client's shaded ones, so the JVM needs no other jar.
 */
final class ArrowRows {

    private static final int MAX_PRECISION = 38;
    private static final int MICROS = 6;
    private static final int DECIMAL_BITS = 128;
    private static final String UTC = "UTC";

    /** Writes a non-null field of a Fluss row into its vector, at an index. */
    @FunctionalInterface
    private interface Setter {
        void set(InternalRow row, int index);
    }

    /** A column's setter bound to its vector (the root's vectors live as long as the root). */
    @FunctionalInterface
    private interface Binder {
        Setter bind(FieldVector vector);
    }

    private record Column(ArrowType type, Binder binder) {}

    private final FieldVector[] vectors;
    private final Setter[] setters;

    private ArrowRows(FieldVector[] vectors, Setter[] setters) {
        this.vectors = vectors;
        this.setters = setters;
    }

    /** The Arrow schema of {@code path}'s rows: its columns, nullable as Fluss declares them. */
    static Schema schema(TablePath path, RowType rowType) {
        List<Field> fields = new ArrayList<>();
        List<DataField> columns = rowType.getFields();
        for (int pos = 0; pos < columns.size(); pos++) {
            DataField field = columns.get(pos);
            FieldType type = new FieldType(field.getType().isNullable(), column(path, field, pos).type(), null);
            fields.add(new Field(field.getName(), type, null));
        }
        return new Schema(fields);
    }

    /** Writers of {@code rowType}'s rows into {@code root}, made by {@link #schema}'s schema. */
    static ArrowRows into(VectorSchemaRoot root, TablePath path, RowType rowType) {
        List<DataField> columns = rowType.getFields();
        FieldVector[] vectors = new FieldVector[columns.size()];
        Setter[] setters = new Setter[columns.size()];
        for (int pos = 0; pos < setters.length; pos++) {
            vectors[pos] = root.getVector(pos);
            setters[pos] = column(path, columns.get(pos), pos).binder().bind(vectors[pos]);
        }
        return new ArrowRows(vectors, setters);
    }

    /** ``row``'s values copied into the vectors at ``index``: the scanner reuses its rows. */
    void write(InternalRow row, int index) {
        for (int pos = 0; pos < setters.length; pos++) {
            if (row.isNullAt(pos)) {
                vectors[pos].setNull(index);
            } else {
                setters[pos].set(row, index);
            }
        }
    }

    private static Column column(TablePath path, DataField field, int pos) {
        DataType type = field.getType();
        return switch (type.getTypeRoot()) {
            case BOOLEAN -> new Column(ArrowType.Bool.INSTANCE, v -> {
                BitVector bits = (BitVector) v;
                return (row, i) -> bits.setSafe(i, row.getBoolean(pos) ? 1 : 0);
            });
            case TINYINT -> new Column(new ArrowType.Int(8, true), v -> {
                TinyIntVector ints = (TinyIntVector) v;
                return (row, i) -> ints.setSafe(i, row.getByte(pos));
            });
            case SMALLINT -> new Column(new ArrowType.Int(16, true), v -> {
                SmallIntVector ints = (SmallIntVector) v;
                return (row, i) -> ints.setSafe(i, row.getShort(pos));
            });
            case INTEGER -> new Column(new ArrowType.Int(32, true), v -> {
                IntVector ints = (IntVector) v;
                return (row, i) -> ints.setSafe(i, row.getInt(pos));
            });
            case BIGINT -> new Column(new ArrowType.Int(64, true), v -> {
                BigIntVector ints = (BigIntVector) v;
                return (row, i) -> ints.setSafe(i, row.getLong(pos));
            });
            case FLOAT -> new Column(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE), v -> {
                Float4Vector floats = (Float4Vector) v;
                return (row, i) -> floats.setSafe(i, row.getFloat(pos));
            });
            case DOUBLE -> new Column(new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE), v -> {
                Float8Vector floats = (Float8Vector) v;
                return (row, i) -> floats.setSafe(i, row.getDouble(pos));
            });
            case DECIMAL -> decimal(path, field, (DecimalType) type, pos);
            case CHAR -> {
                int length = ((CharType) type).getLength();
                yield new Column(ArrowType.Utf8.INSTANCE, v -> {
                    VarCharVector strings = (VarCharVector) v;
                    return (row, i) -> strings.setSafe(i, row.getChar(pos, length).toBytes());
                });
            }
            case STRING -> new Column(ArrowType.Utf8.INSTANCE, v -> {
                VarCharVector strings = (VarCharVector) v;
                return (row, i) -> strings.setSafe(i, row.getString(pos).toBytes());
            });
            case BINARY -> {
                int length = ((BinaryType) type).getLength();
                yield new Column(ArrowType.Binary.INSTANCE, v -> {
                    VarBinaryVector bytes = (VarBinaryVector) v;
                    return (row, i) -> bytes.setSafe(i, row.getBinary(pos, length));
                });
            }
            case BYTES -> new Column(ArrowType.Binary.INSTANCE, v -> {
                VarBinaryVector bytes = (VarBinaryVector) v;
                return (row, i) -> bytes.setSafe(i, row.getBytes(pos));
            });
            case DATE -> new Column(new ArrowType.Date(DateUnit.DAY), v -> {
                DateDayVector days = (DateDayVector) v;
                return (row, i) -> days.setSafe(i, row.getInt(pos)); // days since 1970-01-01
            });
            case TIMESTAMP_WITHOUT_TIME_ZONE -> {
                int precision = micros(path, field, ((TimestampType) type).getPrecision());
                yield new Column(new ArrowType.Timestamp(TimeUnit.MICROSECOND, null), v -> {
                    TimeStampVector micros = (TimeStampVector) v;
                    return (row, i) -> micros.setSafe(i, row.getTimestampNtz(pos, precision).toEpochMicros());
                });
            }
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE -> {
                int precision = micros(path, field, ((LocalZonedTimestampType) type).getPrecision());
                yield new Column(new ArrowType.Timestamp(TimeUnit.MICROSECOND, UTC), v -> {
                    TimeStampVector micros = (TimeStampVector) v;
                    return (row, i) -> micros.setSafe(i, row.getTimestampLtz(pos, precision).toEpochMicros());
                });
            }
            default -> throw unsupported(path, field, "the lake has no exact counterpart for it");
        };
    }

    /** A decimal of at most 18 digits travels as its unscaled long, a wider one as a BigDecimal. */
    private static Column decimal(TablePath path, DataField field, DecimalType type, int pos) {
        int precision = type.getPrecision();
        int scale = type.getScale();
        if (precision > MAX_PRECISION) {
            throw unsupported(path, field, "decimals hold at most " + MAX_PRECISION + " digits");
        }
        boolean compact = org.apache.fluss.row.Decimal.isCompact(precision);
        return new Column(new ArrowType.Decimal(precision, scale, DECIMAL_BITS), v -> {
            DecimalVector decimals = (DecimalVector) v;
            if (compact) {
                return (row, i) -> decimals.setSafe(i, row.getDecimal(pos, precision, scale).toUnscaledLong());
            }
            return (row, i) -> decimals.setSafe(i, row.getDecimal(pos, precision, scale).toBigDecimal());
        });
    }

    private static int micros(TablePath path, DataField field, int precision) {
        if (precision > MICROS) {
            throw unsupported(path, field, "the lake keeps microseconds, not " + precision + " fractional digits");
        }
        return precision;
    }

    private static IllegalArgumentException unsupported(TablePath path, DataField field, String why) {
        return new IllegalArgumentException("Arrow snapshot of " + path + ": column " + field.getName() + " has type "
                + field.getType().asSummaryString() + ", which it cannot write: " + why);
    }
}
