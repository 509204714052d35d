package runhook.embedded;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.function.Supplier;
import java.util.stream.Stream;
import java.util.zip.CRC32C;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.WriteBuffer;
import org.h2.mvstore.type.DataType;

/**
 * The write-ahead journal of the file backend: what each write command changed in the store's
 * maps ({@link JournaledMap}: each key and what it holds after the change), appended whole
 * when the command ends, so that a write is durable once the journal is synced. Without it
 * every group commit was an MVStore commit, which rewrites every page the group touched and the
 * path to each map's root: at a million runs, 120-270 KB written per webhook call, and a
 * commit of 443 ms during a retention sweep that every write waited for.
 *
 * <p>The store itself is written by checkpoints (an MVStore commit, about once a second), which
 * no write waits for. Each checkpoint starts a new journal file (its generation), and the
 * generation is stored in the checkpoint, under the exclusive side of the commit lock (no
 * command half done): on opening, the files of the stored generation and later are replayed on
 * top of it, in order. A checkpoint holds every change of the generations before its own and
 * some of its own (it was taken while commands went on); replaying its own from the start
 * restores each key's last value, as every record is a key's whole value, in the order its
 * collection's lock gave the changes. A record's frame (length, CRC) ends the replay where
 * the last write was torn.
 */
final class Journal {
  /** The stored generation: a key of the file-format map, stored by each checkpoint. */
  static final String GENERATION_KEY = "journal";

  private static final byte PUT = 1;
  private static final byte REMOVE = 2;

  private static final Map<MVStore, Journal> OF_STORE = Collections.synchronizedMap(new WeakHashMap<>());

  private final String fileName;
  private long generation;
  private FileChannel file;
  /** Commands that ended since the last write of the journal, whole. */
  private ByteArrayOutputStream ended = new ByteArrayOutputStream();
  /** The changes of the command running on this thread (none outside commands). */
  private final ThreadLocal<Command> running = new ThreadLocal<>();
  /** Set while this thread writes what needs no record (space reuse, a replay). */
  private final ThreadLocal<Boolean> unrecorded = ThreadLocal.withInitial(() -> false);
  /** Bytes written to the journal files since the open. */
  private volatile long bytesWritten;
  /** A change was made outside a command (or one a record cannot hold): the next group commit is a checkpoint. */
  private volatile boolean changedOutsideCommands;

  private Journal(String fileName) {
    this.fileName = fileName;
  }

  /** The journal of `store`, or null (no journal: H2's own commits, or a rebuild). */
  static Journal of(MVStore store) {
    return OF_STORE.get(store);
  }

  /**
   * Opens the journal of `store`: replays the files of the generation stored in `format` and
   * later, stores their changes with a checkpoint, and starts the next generation's file.
   */
  static Journal open(MVStore store, MVMap<String, String> format) {
    Journal journal = new Journal(store.getFileStore().getFileName());
    OF_STORE.put(store, journal);
    try {
      String stored = format.get(GENERATION_KEY);
      long from = stored == null ? 0 : Long.parseLong(stored);
      List<Long> generations = journal.generationsOnDisk();
      long next = Math.max(from, generations.isEmpty() ? 0 : generations.get(generations.size() - 1)) + 1;
      long started = System.nanoTime();
      int[] replayed = new int[2]; // files, records
      journal.unrecorded(() -> {
        boolean torn = false;
        for (long g : generations) {
          if (g < from || torn) continue;
          replayed[0]++;
          torn = !journal.replay(store, journal.path(g), replayed);
        }
        return null;
      });
      if (replayed[1] > 0) {
        System.out.println("replayed " + replayed[1] + " journal records (" + replayed[0] + " files) in " + (System.nanoTime() - started) / 1_000_000 + " ms");
        System.out.flush();
      }
      format.put(GENERATION_KEY, Long.toString(next));
      store.commit();
      store.sync();
      journal.generation = next;
      journal.file = create(journal.path(next));
      journal.deleteBefore(next);
      return journal;
    } catch (IOException e) {
      OF_STORE.remove(store);
      throw new UncheckedIOException(fileName(store) + ": cannot open its journal", e);
    } catch (RuntimeException e) {
      OF_STORE.remove(store);
      throw e;
    }
  }

  private static String fileName(MVStore store) {
    return store.getFileStore().getFileName();
  }

  Path path(long generation) {
    return Path.of(fileName + ".journal." + generation);
  }

  private List<Long> generationsOnDisk() throws IOException {
    Path base = Path.of(fileName).toAbsolutePath();
    String prefix = base.getFileName() + ".journal.";
    List<Long> found = new ArrayList<>();
    try (Stream<Path> files = Files.list(base.getParent())) {
      files.map(p -> p.getFileName().toString()).filter(n -> n.startsWith(prefix)).forEach(n -> {
        try {
          found.add(Long.parseLong(n.substring(prefix.length())));
        } catch (NumberFormatException e) {
          // not one of ours
        }
      });
    }
    Collections.sort(found);
    return found;
  }

  /** A new file, its name made durable (the directory synced): records synced in it are found after a power cut. */
  private static FileChannel create(Path path) throws IOException {
    FileChannel channel = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE);
    try (FileChannel dir = FileChannel.open(path.toAbsolutePath().getParent(), StandardOpenOption.READ)) {
      dir.force(true);
    }
    return channel;
  }

  /** Removes the files of the generations before `generation` (their changes are in the store). */
  private void deleteBefore(long generation) throws IOException {
    for (long g : generationsOnDisk()) {
      if (g < generation) Files.deleteIfExists(path(g));
    }
  }

  /** Applies one file's records; false if it ended in a torn frame (nothing after it is replayed). */
  private boolean replay(MVStore store, Path path, int[] counted) {
    byte[] bytes;
    try {
      bytes = Files.readAllBytes(path);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + path, e);
    }
    ByteBuffer buffer = ByteBuffer.wrap(bytes);
    while (buffer.remaining() >= 8) {
      int length = buffer.getInt();
      int crc = buffer.getInt();
      if (length < 0 || length > buffer.remaining() || crc != crc(bytes, buffer.position(), length)) return false;
      counted[1] += applyFrame(store, ByteBuffer.wrap(bytes, buffer.position(), length).slice());
      buffer.position(buffer.position() + length);
    }
    return buffer.remaining() == 0;
  }

  /** Applies a frame's records; returns how many. */
  private int applyFrame(MVStore store, ByteBuffer frame) {
    int records = 0;
    for (; frame.hasRemaining(); records++) {
      byte op = frame.get();
      JournaledMap.Kind kind = JournaledMap.Kind.values()[frame.get()];
      byte[] name = new byte[frame.getShort() & 0xffff];
      frame.get(name);
      MVMap<Object, Object> map = store.openMap(new String(name, StandardCharsets.UTF_8), kind.<Object, Object>builder(this));
      Object key = read(map.getKeyType(), frame);
      if (op == PUT) map.put(key, read(map.getValueType(), frame));
      else map.remove(key);
    }
    return records;
  }

  private static Object read(DataType<Object> type, ByteBuffer frame) {
    int length = frame.getInt();
    ByteBuffer value = frame.slice();
    value.limit(length);
    frame.position(frame.position() + length);
    return type.read(value);
  }

  private static int crc(byte[] bytes, int offset, int length) {
    CRC32C crc = new CRC32C();
    crc.update(bytes, offset, length);
    return (int) crc.getValue();
  }

  /** Runs a command, recording its changes, and appends them whole when it ends (however it ends). */
  <T> T recording(Supplier<T> command) {
    if (running.get() != null) return command.get(); // a command within one: its records go with it
    Command c = new Command();
    running.set(c);
    try {
      return command.get();
    } finally {
      running.remove();
      if (c.bytes.size() > 0) {
        synchronized (this) {
          ended.write(c.bytes.toByteArray(), 0, c.bytes.size());
        }
      }
    }
  }

  /** Runs what changes the store without recording it (space reuse: the same content; a replay). */
  <T> T unrecorded(Supplier<T> work) {
    unrecorded.set(true);
    try {
      return work.get();
    } finally {
      unrecorded.set(false);
    }
  }

  /** A change of `key` in `map`: recorded in the command running on this thread. */
  void changed(JournaledMap<?, ?> map, Object key) {
    Command c = running.get();
    if (c == null) {
      if (!unrecorded.get()) changedOutsideCommands = true;
      return;
    }
    @SuppressWarnings("unchecked")
    JournaledMap<Object, Object> m = (JournaledMap<Object, Object>) map;
    Object value = m.get(key);
    c.record(value == null ? REMOVE : PUT, m.kind, m.journalName(), m.getKeyType(), key, m.getValueType(), value);
  }

  /** A change no record holds (a map cleared): the next group commit stores the store. */
  void changedUnrecorded() {
    if (!unrecorded.get()) changedOutsideCommands = true;
  }

  /** Whether something changed outside the records since the last checkpoint began (then the next must come). */
  boolean changedOutsideCommands() {
    return changedOutsideCommands;
  }

  /** Whether commands ended whose records are not yet written. */
  synchronized boolean hasEnded() {
    return ended.size() > 0;
  }

  /** Writes and syncs the records of the commands that ended so far. */
  void sync() throws IOException {
    ByteArrayOutputStream frame;
    synchronized (this) {
      if (ended.size() == 0) return;
      frame = ended;
      ended = new ByteArrayOutputStream(Math.max(64, frame.size()));
    }
    byte[] records = frame.toByteArray();
    ByteBuffer out = ByteBuffer.allocate(8 + records.length);
    out.putInt(records.length).putInt(crc(records, 0, records.length)).put(records).flip();
    while (out.hasRemaining()) file.write(out);
    file.force(false);
    bytesWritten += out.limit();
  }

  long bytesWritten() {
    return bytesWritten;
  }

  /**
   * Starts the next generation: its number is put in `format`, for the checkpoint that follows
   * (the caller holds the exclusive side of the commit lock, so no command is half done); what
   * ended and was not written is dropped, as that checkpoint holds it. Returns the generation
   * whose files the checkpoint makes obsolete once synced.
   */
  long nextGeneration(MVMap<String, String> format) throws IOException {
    synchronized (this) {
      ended = new ByteArrayOutputStream();
    }
    changedOutsideCommands = false;
    FileChannel previous = file;
    file = create(path(generation + 1));
    generation++;
    format.put(GENERATION_KEY, Long.toString(generation));
    previous.close();
    return generation;
  }

  /** After a checkpoint of `generation` is synced: the files before it go. */
  void checkpointed(long generation) throws IOException {
    deleteBefore(generation);
  }

  /**
   * Closes the file. `stored`: the store was closed with every change in it and a generation
   * after this one's (so every file goes); else (a failure) the files stay, to be replayed.
   */
  void close(MVStore store, boolean stored) {
    OF_STORE.remove(store);
    try {
      file.close();
      if (stored) deleteBefore(Long.MAX_VALUE);
    } catch (IOException e) {
      // the store's generation says which files are still needed at the next open
    }
  }

  /** The records of one command. */
  private static final class Command {
    final ByteArrayOutputStream bytes = new ByteArrayOutputStream(256);
    private final DataOutputStream out = new DataOutputStream(bytes);
    private final WriteBuffer buffer = new WriteBuffer(256);

    void record(byte op, JournaledMap.Kind kind, String mapName, DataType<Object> keyType, Object key, DataType<Object> valueType, Object value) {
      try {
        out.writeByte(op);
        out.writeByte(kind.ordinal());
        byte[] name = mapName.getBytes(StandardCharsets.UTF_8);
        out.writeShort(name.length);
        out.write(name);
        write(keyType, key);
        if (op == PUT) write(valueType, value);
      } catch (IOException e) {
        throw new UncheckedIOException(e); // a ByteArrayOutputStream does not throw
      }
    }

    private void write(DataType<Object> type, Object value) throws IOException {
      buffer.clear();
      type.write(buffer, value);
      ByteBuffer b = buffer.getBuffer();
      out.writeInt(b.position());
      out.write(b.array(), b.arrayOffset(), b.position());
    }
  }
}
