package runhook.embedded;

import de.bwaldvogel.mongo.bson.Document;
import java.util.Locale;

/** {@code setParameter} / {@code getParameter} for the parameters the embedded server has: {@code notablescan} ({@link ScanGuard}). */
final class ServerParameters {
  private ServerParameters() {}

  /** The answer, or null when the command is not about a parameter this server keeps. */
  static Document handle(String command, Document query) {
    String name = command.toLowerCase(Locale.ROOT);
    if (!query.containsKey("notablescan")) return null;
    if (name.equals("setparameter")) {
      Object value = query.get("notablescan");
      boolean on = value instanceof Boolean b ? b : value instanceof Number n && n.doubleValue() != 0;
      return new Document("was", ScanGuard.set(on)).append("ok", 1.0);
    }
    if (name.equals("getparameter")) return new Document("notablescan", ScanGuard.enabled()).append("ok", 1.0);
    return null;
  }
}
