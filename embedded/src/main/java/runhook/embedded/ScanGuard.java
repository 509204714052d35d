package runhook.embedded;

import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import java.util.Set;

/**
 * MongoDB's {@code notablescan}: when on, a query that no index serves is refused instead of
 * reading the whole collection (system collections and the internal databases excepted, as
 * MongoDB excepts them). Off by default; {@code --notablescan}, {@code -Drunhook.notablescan=true}
 * or {@code db.adminCommand({setParameter: 1, notablescan: true})} turns it on.
 */
final class ScanGuard {
  private ScanGuard() {}

  /** MongoDB's code for "no indexed plan available, and no table scans allowed". */
  static final int NO_QUERY_EXECUTION_PLANS = 291;

  private static final Set<String> INTERNAL_DATABASES = Set.of("admin", "local", "config");

  private static volatile boolean enabled = Boolean.getBoolean("runhook.notablescan");

  static boolean enabled() {
    return enabled;
  }

  /** Sets the switch; returns what it was. */
  static boolean set(boolean on) {
    boolean was = enabled;
    enabled = on;
    return was;
  }

  static boolean applies(String database, String collection) {
    return enabled && !INTERNAL_DATABASES.contains(database) && !collection.startsWith("system.");
  }

  static MongoServerError refusal(String database, String collection, Document filter, Document sort) {
    return new MongoServerError(NO_QUERY_EXECUTION_PLANS, "NoQueryExecutionPlans",
        "error processing query: ns=" + database + "." + collection + " filter=" + filter + (sort == null || sort.isEmpty() ? "" : " sort=" + sort)
            + " :: No indexed plan available, and no table scans allowed");
  }
}
