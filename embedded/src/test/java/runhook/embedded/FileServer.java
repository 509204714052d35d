package runhook.embedded;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import de.bwaldvogel.mongo.MongoServer;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;

/** The file backend in a temporary directory, served on a free port, with a client of it. */
final class FileServer implements AutoCloseable {
  final Path dir;
  final FastH2Backend backend;
  final MongoServer server;
  final MongoClient client;
  /** Whether closing removes the directory (one of its own). */
  private final boolean removed;

  FileServer(String name) throws Exception {
    this(Files.createTempDirectory(name), true);
  }

  /** In `dir`, removed when it closes if `removed`. */
  FileServer(Path dir, boolean removed) throws Exception {
    this.dir = dir;
    this.removed = removed;
    backend = FastH2Backend.open(dir.resolve("db.mv").toString());
    server = new MongoServer(backend);
    server.bind(new InetSocketAddress("127.0.0.1", 0));
    client = MongoClients.create("mongodb://127.0.0.1:" + server.getLocalAddress().getPort());
  }

  @Override
  public void close() throws Exception {
    client.close();
    server.shutdownNow();
    if (!removed) return;
    try (var files = Files.walk(dir)) {
      files.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
    }
  }
}
