package runhook.embedded;

import java.util.Map;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.type.DataType;

/**
 * A map of the store whose every change is also recorded in the {@link Journal}: the key, and
 * what it holds after the change (all of MVMap's writes go through operate; a space-reuse
 * rewrite too, which the journal leaves out).
 */
final class JournaledMap<K, V> extends MVMap<K, V> {
  /** What a map holds, which says its key and value types (a replay opens it by this). */
  enum Kind {
    /** A collection's documents by _id. */
    DOCUMENTS,
    /** An index's entries. */
    INDEX,
    /** A collection's metadata (its data size, multikey flags): H2's default types. */
    META;

    /** Opens maps of this kind as JournaledMaps of `journal` (plain MVMaps when it is null: no journal). */
    @SuppressWarnings("unchecked")
    <K, V> MVMap.Builder<K, V> builder(Journal journal) {
      MVMap.Builder<K, V> builder = journal == null ? new MVMap.Builder<>() : new MVMap.Builder<>() {
        @Override
        protected MVMap<K, V> create(Map<String, Object> config) {
          config.put("singleWriter", false);
          return new JournaledMap<>(config, getKeyType(), getValueType(), journal, Kind.this);
        }
      };
      return switch (this) {
        case DOCUMENTS -> builder.keyType((DataType<K>) ValueType.INSTANCE).valueType((DataType<V>) ValueType.INSTANCE);
        case INDEX -> builder.keyType((DataType<K>) H2IndexEntries.KeyType.INSTANCE).valueType((DataType<V>) ValueType.INSTANCE);
        case META -> builder;
      };
    }
  }

  private final Journal journal;
  final Kind kind;
  /** Read once: MVMap.getName looks the name up in the store's metadata. */
  private volatile String name;

  private JournaledMap(Map<String, Object> config, DataType<K> keyType, DataType<V> valueType, Journal journal, Kind kind) {
    super(config, keyType, valueType);
    this.journal = journal;
    this.kind = kind;
  }

  String journalName() {
    String n = name;
    if (n == null) name = n = getName();
    return n;
  }

  @Override
  public V operate(K key, V value, DecisionMaker<? super V> decisionMaker) {
    V previous = super.operate(key, value, decisionMaker);
    journal.changed(this, key);
    return previous;
  }

  @Override
  public void clear() {
    super.clear();
    journal.changedUnrecorded();
  }
}
