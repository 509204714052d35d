package runhook.embedded;

import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.bson.Document;
import java.util.List;
import java.util.Locale;

/**
 * Reads what a delete or an update is about to change (the pages that hold its documents and
 * their index entries) before it takes its collection and the commit's shared lock. Pages that
 * are only in the file (a retention sweep's month-old runs, at random `_id`s and record ids)
 * are then read while other writes go on and commits are stored; the write itself finds them
 * in the caches, and every write behind it waits for its changes only. Nothing is changed
 * here: a document that changes in between only leaves a page read for nothing.
 */
final class ReadAhead {
  private ReadAhead() {}

  /** At most this many documents per command: a larger write reads the rest as it goes. */
  static final int MAX_DOCUMENTS = 100;

  static void before(MongoDatabase database, String command, Document query) {
    if (!(database instanceof FastH2Database db)) return;
    try {
      switch (command.toLowerCase(Locale.ROOT)) {
        case "delete" -> {
          int left = MAX_DOCUMENTS;
          for (Document d : statements(query.get("deletes"))) {
            int limit = d.get("limit") instanceof Number n ? n.intValue() : 0;
            left -= db.readAhead(query.get(command), d.get("q"), limit, left);
            if (left <= 0) break;
          }
        }
        case "update" -> {
          int left = MAX_DOCUMENTS;
          for (Document u : statements(query.get("updates"))) {
            left -= db.readAhead(query.get(command), u.get("q"), Boolean.TRUE.equals(u.get("multi")) ? 0 : 1, left);
            if (left <= 0) break;
          }
        }
        default -> {
          // Inserts and findAndModify (runhook's: a new run, a claim, a run's next state) touch
          // recent pages: reading them twice would cost the hot path for no measured gain.
        }
      }
    } catch (RuntimeException e) {
      // only a read ahead: the write itself reports what is wrong with it
    }
  }

  private static List<Document> statements(Object list) {
    if (!(list instanceof List<?> l)) return List.of();
    return l.stream().filter(Document.class::isInstance).map(Document.class::cast).toList();
  }
}
