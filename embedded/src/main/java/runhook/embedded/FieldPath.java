package runhook.embedded;

import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.backend.Utils;
import de.bwaldvogel.mongo.bson.Document;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * An indexed field's path, split once: reads a document's value at it as
 * {@link Utils#getSubdocumentValueCollectionAware} does (the elements' values where the path
 * crosses an array of documents, {@link Missing} where it ends), which splits the path with a
 * regular expression and a stream on every call: a quarter of the embedded server's allocations
 * under webhook load went to computing index keys that way.
 */
final class FieldPath {
  private final String path;
  /** The path's fields, or null for a path MongoDB refuses (Utils then raises its error). */
  private final String[] fields;

  FieldPath(String path) {
    this.path = path;
    boolean valid = !path.startsWith(".") && !path.endsWith(".") && !path.contains("..");
    this.fields = valid ? path.split("\\.") : null;
  }

  Object valueIn(Document document) {
    if (fields == null) return Utils.getSubdocumentValueCollectionAware(document, path);
    return valueIn(document, 0);
  }

  private Object valueIn(Document document, int from) {
    Object value = document.getOrMissing(fields[from]);
    if (from == fields.length - 1) return value;
    if (value instanceof Document sub) return valueIn(sub, from + 1);
    if (!(value instanceof Collection<?> elements)) return Missing.getInstance();
    List<Object> result = new ArrayList<>();
    for (Object element : elements) {
      if (!(element instanceof Document sub)) {
        result.add(Missing.getInstance());
        continue;
      }
      Object v = valueIn(sub, from + 1);
      if (v instanceof Collection<?> c) result.addAll(c);
      else result.add(v);
    }
    return result;
  }
}
