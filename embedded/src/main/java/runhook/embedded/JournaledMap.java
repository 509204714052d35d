package runhook.embedded;

import java.lang.reflect.Field;
import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.type.DataType;

/**
 * An MVStore map whose changes are recorded in the store's {@link Journal} as they are made: the
 * key and the value it now has (or its removal), in the map's own data types. Every map of the
 * collections (documents, indexes, their meta maps) is opened through {@link #open}, the one
 * place that knows each map's types, so that a replay of the journal opens each map as the
 * server does.
 */
final class JournaledMap<K, V> extends MVMap<K, V> {
  /** Each file store's journal (none: a store without one, whose maps record nothing). */
  private static final Map<MVStore, Journal> JOURNALS = Collections.synchronizedMap(new WeakHashMap<>());
  /** H2's decision maker of a page rewrite (space reuse): the page moves, its entries stay as they are. */
  private static final Class<?> REWRITE;
  /** putIfAbsent's decision maker (H2 keeps both to its package). */
  private static final DecisionMaker<?> IF_ABSENT;

  static {
    try {
      REWRITE = Class.forName(MVMap.class.getName() + "$RewriteDecisionMaker");
      Field field = DecisionMaker.class.getDeclaredField("IF_ABSENT");
      field.setAccessible(true);
      IF_ABSENT = (DecisionMaker<?>) field.get(null);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final Journal journal;

  private JournaledMap(Map<String, Object> config, DataType<K> keyType, DataType<V> valueType, Journal journal) {
    super(config, keyType, valueType);
    this.journal = journal;
  }

  static void register(MVStore store, Journal journal) {
    JOURNALS.put(store, journal);
  }

  static void unregister(MVStore store) {
    JOURNALS.remove(store);
  }

  /**
   * Opens the map of this name with the types its name calls for: a collection's documents
   * ("databases.&lt;db&gt;.&lt;collection&gt;") keyed and valued by {@link ValueType}, an index
   * ("&lt;db&gt;.&lt;collection&gt;._index_&lt;name&gt;") keyed by {@link H2IndexEntries.KeyType},
   * any other (a collection's meta map) by H2's own types.
   */
  @SuppressWarnings("unchecked")
  static <K, V> MVMap<K, V> open(MVStore store, String name) {
    Journal journal = JOURNALS.get(store);
    MVMap.Builder<K, V> builder = journal == null ? new MVMap.Builder<>() : new Builder<>(journal);
    if (name.startsWith("databases.")) {
      builder.keyType((DataType<? super K>) ValueType.INSTANCE).valueType((DataType<? super V>) ValueType.INSTANCE);
    } else if (name.contains("._index_")) {
      builder.keyType((DataType<? super K>) H2IndexEntries.KeyType.INSTANCE).valueType((DataType<? super V>) ValueType.INSTANCE);
    }
    return store.openMap(name, builder);
  }

  @Override
  public V operate(K key, V value, DecisionMaker<? super V> decisionMaker) {
    if (decisionMaker.getClass() == REWRITE) return super.operate(key, value, decisionMaker);
    // The change and its record in one step: two writers of one key record in the order they wrote.
    synchronized (this) {
      V previous = super.operate(key, value, decisionMaker);
      if (decisionMaker == DecisionMaker.PUT) {
        journal.put(this, key, value);
      } else if (decisionMaker == DecisionMaker.REMOVE) {
        if (previous != null) journal.remove(this, key);
      } else if (decisionMaker == IF_ABSENT) {
        if (previous == null) journal.put(this, key, value);
      } else {
        V now = get(key); // another decision: what it decided
        if (now == null) journal.remove(this, key);
        else journal.put(this, key, now);
      }
      return previous;
    }
  }

  @Override
  public void clear() {
    synchronized (this) {
      super.clear();
      journal.clear(this);
    }
  }

  private static final class Builder<K, V> extends MVMap.Builder<K, V> {
    private final Journal journal;

    Builder(Journal journal) {
      this.journal = journal;
    }

    @Override
    protected MVMap<K, V> create(Map<String, Object> config) {
      config.put("singleWriter", false);
      return new JournaledMap<>(config, getKeyType(), getValueType(), journal);
    }
  }
}
