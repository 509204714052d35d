package runhook.embedded;

import de.bwaldvogel.mongo.bson.Document;
import java.util.ArrayList;
import java.util.List;

/**
 * MongoDB reads a document whole. mongo-java-server updates a stored document in place, field
 * by field (the memory backend; the file backend stores a new one instead, {@link
 * FastH2Database}), an aggregation stage may change the nested documents of what it reads, and
 * find, aggregate and findAndModify answer with the stored objects themselves, encoded after the
 * collection's lock is released: a reply encoded while another connection updates that document
 * could hold half of the update (a run already finished, its slot not yet freed). So those
 * replies carry copies, taken under the collection's lock: query results are collected there
 * (only for a command that answers with them: updates and deletes work on the stored objects
 * through the same path), and findAndModify holds it.
 */
final class WholeReads {
  private WholeReads() {}

  private static final ThreadLocal<Boolean> ANSWERS_WITH_DOCUMENTS = ThreadLocal.withInitial(() -> false);

  /** Runs a command; its query results are copied if it answers with documents. */
  static Document handle(String command, java.util.function.Supplier<Document> handler) {
    String name = command.toLowerCase(java.util.Locale.ROOT);
    ANSWERS_WITH_DOCUMENTS.set(name.equals("find") || name.equals("aggregate"));
    try {
      return handler.get();
    } finally {
      ANSWERS_WITH_DOCUMENTS.set(false);
    }
  }

  static List<Document> copies(List<Document> documents) {
    if (!ANSWERS_WITH_DOCUMENTS.get()) return documents;
    List<Document> out = new ArrayList<>(documents.size());
    for (Document d : documents) out.add(d.cloneDeeply());
    return out;
  }

  static Document copyValue(Document reply) {
    if (reply.get("value") instanceof Document value) reply.put("value", value.cloneDeeply());
    return reply;
  }
}
