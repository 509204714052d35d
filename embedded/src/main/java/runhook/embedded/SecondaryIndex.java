package runhook.embedded;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.bson.Document;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * A non-unique index, which mongo-java-server does not keep: one entry per document (per
 * array element at an indexed field) whose key is the indexed values followed by the
 * document's position and its `_id`, as MongoDB's keys end with the record id: documents with
 * equal values come in the order they were stored, so that a new one is appended after them
 * (after a random `_id`, every finished run went to a random page of the indexes whose fields
 * it leaves null), and the `_id` keeps keys distinct where a file of format 2 stored a document
 * under an `_id` that equals a later position. A missing field is indexed as null, an empty
 * array as null too (so that every document has an entry and a walk of the whole index sees
 * every document).
 */
final class SecondaryIndex<P> extends Index<P> implements OrderedIndex {
  private static final String ID = "_id";
  private final IndexEntries entries;
  private final FieldPath[] paths;
  /** The position of the document its collection is removing ({@link #removing}), which the entries' keys hold. */
  private P removing;

  SecondaryIndex(String name, List<IndexKey> keys, boolean sparse, IndexEntries entries) {
    super(name, keys, sparse);
    this.entries = entries;
    this.paths = keys.stream().map(k -> new FieldPath(k.getKey())).toArray(FieldPath[]::new);
  }

  @Override
  public IndexEntries entries() {
    return entries;
  }

  @Override
  public boolean coversEveryDocument() {
    return !isSparse();
  }

  @Override
  public boolean multikey() {
    return entries.multikey();
  }

  /**
   * The entry keys of a document at a position: the product of each field's values (its
   * array's elements), each followed by the position and `_id`.
   */
  private Set<KeyValue> entryKeys(Document document, Object position) {
    Object[] key = new Object[paths.length + 2];
    for (int i = 0; i < paths.length; i++) {
      Object v = paths[i].valueIn(document);
      if (v instanceof Collection<?>) return entryKeysOfArrays(document, position);
      key[i] = IndexOrder.normalize(v);
    }
    key[paths.length] = position;
    key[paths.length + 1] = IndexOrder.normalize(document.get(ID));
    return Set.of(new KeyValue(key));
  }

  private Set<KeyValue> entryKeysOfArrays(Document document, Object position) {
    List<List<Object>> values = new ArrayList<>();
    int arrays = 0;
    for (FieldPath path : paths) {
      Object v = path.valueIn(document);
      if (v instanceof Collection<?> c) {
        arrays++;
        List<Object> elements = new ArrayList<>();
        for (Object e : c) elements.add(IndexOrder.normalize(e));
        if (elements.isEmpty()) elements.add(null);
        values.add(elements);
      } else {
        List<Object> one = new ArrayList<>(1);
        one.add(IndexOrder.normalize(v));
        values.add(one);
      }
    }
    if (arrays > 1) getKeyValues(document); // refuses parallel arrays, as MongoDB does
    List<Object> tail = Arrays.asList(position, IndexOrder.normalize(document.get(ID)));
    Set<KeyValue> keys = new LinkedHashSet<>();
    product(values, 0, new ArrayList<>(), tail, keys);
    return keys;
  }

  private static void product(List<List<Object>> values, int i, List<Object> prefix, List<Object> tail, Set<KeyValue> out) {
    if (i == values.size()) {
      List<Object> key = new ArrayList<>(prefix);
      key.addAll(tail);
      out.add(new KeyValue(key));
      return;
    }
    for (Object v : values.get(i)) {
      prefix.add(v);
      product(values, i + 1, prefix, tail, out);
      prefix.remove(prefix.size() - 1);
    }
  }

  @Override
  public void readEntries(Document document, Object position) {
    for (KeyValue key : entryKeys(document, position)) entries.get(key);
  }

  /** Not needed to find a document's position: the `_id` index answers that. */
  @Override
  public P getPosition(Document document) {
    return null;
  }

  @Override
  public void checkAdd(Document document, MongoCollection<P> collection) {
    entryKeys(document, null);
  }

  @Override
  public void add(Document document, P position, MongoCollection<P> collection) {
    Set<KeyValue> keys = entryKeys(document, position);
    if (keys.size() > 1 || hasArray(document)) entries.markMultikey();
    for (KeyValue key : keys) entries.putIfAbsent(key, position);
  }

  private boolean hasArray(Document document) {
    for (FieldPath path : paths) {
      if (path.valueIn(document) instanceof Collection<?>) return true;
    }
    return false;
  }

  /**
   * Runs a collection's removal of `document` with its position known to the collection's
   * secondary indexes: mongo-java-server asks each index to remove a document by the document
   * alone, the `_id` index first, which then no longer knows the position these keys hold.
   */
  static <P> void removing(List<Index<P>> indexes, Document document, Runnable removal) {
    P position = null;
    for (Index<P> index : indexes) {
      if (index instanceof UniqueIndex<P> unique && (position = unique.getPosition(document)) != null) break;
    }
    for (Index<P> index : indexes) if (index instanceof SecondaryIndex<P> secondary) secondary.removing = position;
    try {
      removal.run();
    } finally {
      for (Index<P> index : indexes) if (index instanceof SecondaryIndex<P> secondary) secondary.removing = null;
    }
  }

  /** Only inside {@link #removing}: elsewhere the position is unknown, and so is the document (null, as for a document not stored). */
  @Override
  @SuppressWarnings("unchecked")
  public P remove(Document document) {
    if (removing == null) return null;
    P position = null;
    for (KeyValue key : entryKeys(document, removing)) {
      Object removed = entries.remove(key);
      if (removed != null) position = (P) removed;
    }
    return position;
  }

  @Override
  public boolean canHandle(Document query) {
    return false; // planned by QueryPlanner, never by mongo-java-server's per-index check
  }

  @Override
  public Iterable<P> getPositions(Document query) {
    throw new UnsupportedOperationException("secondary indexes are walked through QueryPlanner");
  }

  @Override
  public long getCount() {
    return entries.size();
  }

  @Override
  public boolean isEmpty() {
    return entries.size() == 0;
  }

  @Override
  public long getDataSize() {
    return getCount();
  }

  @Override
  public void checkUpdate(Document oldDocument, Document newDocument, MongoCollection<P> collection) {
    entryKeys(newDocument, null);
  }

  @Override
  public void updateInPlace(Document oldDocument, Document newDocument, P position, MongoCollection<P> collection) {
    Set<KeyValue> before = entryKeys(oldDocument, position);
    Set<KeyValue> after = entryKeys(newDocument, position);
    if (Objects.equals(before, after)) return;
    for (KeyValue key : before) {
      if (!after.contains(key)) entries.remove(key);
    }
    if (after.size() > 1 || hasArray(newDocument)) entries.markMultikey();
    for (KeyValue key : after) {
      if (!before.contains(key)) entries.putIfAbsent(key, position);
    }
  }

  @Override
  public void drop() {
    // the backend removes the entries' storage (H2Database.dropIndex removes the map)
  }
}
