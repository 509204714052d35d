package runhook.embedded;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Predicate;
import java.util.zip.CRC32C;
import org.h2.mvstore.DataUtils;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.RootReference;
import org.h2.mvstore.WriteBuffer;
import org.h2.mvstore.type.DataType;

/**
 * The file backend's journal, as MongoDB's: a group of writes is durable once the changes they
 * made to the maps (each key with the value it now has, or its removal: {@link JournaledMap}) are
 * appended to this file and synced. The maps' pages are written by a checkpoint, an MVStore
 * commit, about once a second ({@link #checkpointDue}). Without it, every group commit wrote
 * each page it changed and the path from it to its map's root: at a million runs ~150 KB a call,
 * four fifths of it the inner pages of indexes and H2's chunk metadata, which a checkpoint writes
 * once for all the writes of its second.
 * <p>
 * A checkpoint starts a new generation: its commit names it (in the store's format map), and
 * the groups taken after it belong to it. Two files take turns, one per generation (even, odd),
 * each with a header naming its generation: while a checkpoint's chunk is written, the groups
 * of the new generation go to one while the other still holds the groups of the generation
 * before, which the store's file holds only once that chunk is synced ({@link #retire}).
 * Opening the store replays the groups of the generation its last commit names, then those of
 * the next one (a checkpoint whose chunk never reached the disk), each group whole or not at all
 * (a checksum covers it), and checkpoints. A file of another generation holds only what the
 * store's file holds already. Replaying a change the store's file holds already changes nothing
 * (each names the value its key took), so a checkpoint's chunk may hold writes of the generation
 * it starts.
 */
final class Journal implements AutoCloseable {
  /** "RHJ1". */
  private static final int MAGIC = 0x52484A31;
  private static final int HEADER_BYTES = 4 + 8 + 8;
  private static final byte PUT = 1;
  private static final byte REMOVE = 2;
  private static final byte CLEAR = 3;
  /** The format map's key naming the journal and the generation of the last checkpoint: "&lt;id&gt;:&lt;generation&gt;". */
  static final String MARK = "journal";
  /** The odd generations' file is the even ones' with this added to its name. */
  static final String ODD_SUFFIX = "2";

  /** A checkpoint at least this often while there are changes (ms). */
  private static final long CHECKPOINT_NS = Long.getLong("runhook.h2.checkpointMs", 1000) * 1_000_000;
  /**
   * And as soon as the unsaved pages take this much memory. A larger checkpoint writes a page
   * that many writes changed once, and the inner pages and H2's chunk records above them once;
   * its chunk is written beside the writes, so only its memory is the cost. 8 MB against 2 MB
   * (bench:snapshot measure on a settled million-run file): 19-27 KB written per accepted call
   * instead of 35-66, some 10 % more accepts empty and at a million (0.84-0.99x / 0.94-0.98x
   * at 16 / 64 callers in four measures, 2 MB 0.80-0.91x / 0.87-0.93x in three); bench
   * --grow: accepts at a million 0.85-0.94x empty in three runs (2 MB: 0.79-0.86x in four), a
   * sweep's longest write 38-50 ms.
   */
  private static final long CHECKPOINT_UNSAVED_BYTES = Long.getLong("runhook.h2.checkpointUnsavedMb", 8) << 20;
  /** And once the journal holds this much, so that a replay stays short. */
  private static final long CHECKPOINT_JOURNAL_BYTES = 64L << 20;

  /** Changes taken as one group, of the generation they were recorded in. */
  record Group(WriteBuffer changes, long generation) {}

  private final MVStore store;
  private final MVMap<String, String> format;
  /** files[g &amp; 1]: generation g's groups. */
  private final FileChannel[] files;
  /** Names this journal in the store it belongs to: a journal beside another store's file is not replayed into it. */
  private final long id;
  /** The generation of the changes recorded now (the last checkpoint's). */
  private long generation;
  /** Whether the next generation's file is empty, its header written: the checkpoint before this one is synced. */
  private boolean nextReady;
  /** Changes recorded since the last group was taken; swapped with {@link #spare} by {@link #takeGroup}. */
  private WriteBuffer pending = new WriteBuffer(1 << 16);
  private WriteBuffer spare = new WriteBuffer(1 << 16);
  /** Whether the maps' changes are recorded: not while replaying (they are the journal's own), nor in a store that commits every group. */
  private volatile boolean recording;
  /** Bytes in the current generation's file. */
  private long journalBytes;
  /** The groups replayed when the journal was opened. */
  private int replayed;
  private long checkpointedNs = System.nanoTime();
  /** H2's meta map (map names and ids) at the last checkpoint: a map created, renamed or removed since needs one. */
  private RootReference<String, String> metaAtCheckpoint;

  private Journal(MVStore store, MVMap<String, String> format, FileChannel[] files, long id, long generation) {
    this.store = store;
    this.format = format;
    this.files = files;
    this.id = id;
    this.generation = generation;
  }

  /**
   * The journal of the store, beside its file; its groups of the store's generation and the next
   * are replayed into the maps (opened as {@link JournaledMap#open} opens them), and the store is
   * checkpointed, which starts a new generation. Whatever the start's settings: a store
   * committed without its journal must not keep a generation whose journal a later start would
   * replay over newer changes. Then the maps' changes are recorded if {@code record}; if not,
   * close it (the store's commits are its writes' durability).
   */
  static Journal open(MVStore store, MVMap<String, String> format, Path path, boolean record) throws IOException {
    String mark = format.get(MARK);
    long id;
    long generation;
    if (mark == null) {
      id = new SecureRandom().nextLong();
      generation = 0;
    } else {
      int colon = mark.indexOf(':');
      id = Long.parseUnsignedLong(mark.substring(0, colon), 16);
      generation = Long.parseLong(mark.substring(colon + 1));
    }
    FileChannel[] files = new FileChannel[2];
    try {
      files[0] = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
      files[1] = FileChannel.open(oddFile(path), StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
    } catch (IOException e) {
      closeQuietly(files);
      throw e;
    }
    Journal journal = new Journal(store, format, files, id, generation);
    try {
      JournaledMap.register(store, journal);
      int groups = mark == null ? 0 : journal.replay();
      journal.replayed = groups;
      if (groups > 0) {
        System.out.println("replayed " + groups + " groups of writes from the journal " + path);
        System.out.flush();
      }
      journal.checkpointSynced();
      journal.recording = record;
      return journal;
    } catch (IOException | RuntimeException e) {
      JournaledMap.unregister(store);
      closeQuietly(files);
      throw e;
    }
  }

  /** The file of the odd generations, beside the even ones' at `path`. */
  static Path oddFile(Path path) {
    return path.resolveSibling(path.getFileName() + ODD_SUFFIX);
  }

  /** The groups of writes replayed when the journal was opened (those acknowledged after the last checkpoint). */
  int replayed() {
    return replayed;
  }

  synchronized void put(MVMap<?, ?> map, Object key, Object value) {
    if (!recording) return;
    record(PUT, map, key);
    write(map.getValueType(), value);
  }

  synchronized void remove(MVMap<?, ?> map, Object key) {
    if (!recording) return;
    record(REMOVE, map, key);
  }

  synchronized void clear(MVMap<?, ?> map) {
    if (!recording) return;
    pending.put(CLEAR).putVarInt(map.getId());
  }

  private void record(byte op, MVMap<?, ?> map, Object key) {
    pending.put(op).putVarInt(map.getId());
    write(map.getKeyType(), key);
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private void write(DataType type, Object value) {
    type.write(pending, value);
  }

  /**
   * Whether the next commit must be a checkpoint (called under the commit lock): maps changed
   * ({@link #mapsChanged}), a second has passed with changes unsaved, or the unsaved pages or
   * the journal are large.
   */
  boolean checkpointDue() {
    if (mapsChanged()) return true;
    if (!store.hasUnsavedChanges()) return false;
    return System.nanoTime() - checkpointedNs >= CHECKPOINT_NS
        || store.getUnsavedMemory() >= CHECKPOINT_UNSAVED_BYTES
        || journalBytes >= CHECKPOINT_JOURNAL_BYTES;
  }

  /**
   * Whether the pages changed since the last checkpoint take twice what makes one due (while
   * the one before it is being written): then the writes wait for it, so that a checkpoint's
   * chunk, and the sync that writes wait for, stay bounded. (With four times, a retention
   * sweep's longest write waited 129 ms at a million runs, behind a sync of 126 ms, where with
   * twice it waited 38-50 ms.)
   */
  boolean checkpointOverdue() {
    return store.getUnsavedMemory() >= 2 * CHECKPOINT_UNSAVED_BYTES;
  }

  /**
   * Whether a map was created, renamed or removed since the last checkpoint (H2's meta map,
   * which the journal does not record, changed): the groups that write to it need a checkpoint
   * synced before they are acknowledged, for a replay opens only maps the store's file names.
   */
  boolean mapsChanged() {
    return store.getMetaMap().flushAndGetRoot() != metaAtCheckpoint;
  }

  /** Whether a checkpoint may start: the one before it is synced ({@link #retire}). */
  synchronized boolean nextReady() {
    return nextReady;
  }

  /**
   * The changes recorded since the last call (under the commit lock, so that they are whole
   * writes), or null if none; valid until the next call.
   */
  synchronized Group takeGroup() {
    if (pending.position() == 0) return null;
    WriteBuffer group = pending;
    pending = spare.clear();
    spare = group;
    return new Group(group, generation);
  }

  /**
   * Called with the error of an append that failed: true (once it has waited for space) to make
   * it again, false to fail it ({@link DiskGuard#awaitSpace}). By default, fail.
   */
  private volatile Predicate<IOException> retryAppend = e -> false;

  void retryAppendsWhile(Predicate<IOException> retry) {
    retryAppend = retry;
  }

  /**
   * Appends a group (from {@link #takeGroup}) to its generation's file and syncs it: its writes
   * are durable on return. Returns the bytes appended. An append that fails is cut off the file
   * (a replay stops at a torn group, and would never reach the groups after it), then made again
   * if {@link #retryAppend} says so.
   */
  long append(Group group) throws IOException {
    ByteBuffer payload = group.changes().getBuffer().duplicate().flip();
    CRC32C crc = new CRC32C();
    crc.update(ByteBuffer.allocate(8).putLong(0, group.generation()));
    crc.update(payload.duplicate());
    ByteBuffer header = ByteBuffer.allocate(8).putInt(payload.remaining()).putInt((int) crc.getValue()).flip();
    long bytes = header.remaining() + payload.remaining();
    FileChannel file = files[(int) (group.generation() & 1)];
    long at = file.position();
    for (;;) {
      ByteBuffer[] frame = {header.duplicate(), payload.duplicate()};
      try {
        for (long written = 0; written < bytes; ) written += file.write(frame);
        file.force(false);
        break;
      } catch (IOException e) {
        file.truncate(at);
        file.position(at);
        if (!retryAppend.test(e)) throw e;
      }
    }
    synchronized (this) {
      if (group.generation() == generation) journalBytes += bytes;
    }
    return bytes;
  }

  /**
   * A checkpoint, under the commit lock (no write runs): the next generation starts, named by
   * the format map for `commit`, which commits the store (taking its maps' roots; their chunk is
   * written before it returns, or after). Once that chunk is synced, {@link #retire}. Returns
   * the group of the generation before that was recorded since the last one taken (null if
   * none): its writes are in the checkpoint, and a checkpoint written after the commit lock is
   * released (writes acknowledged by the next generation's groups meanwhile) needs it appended.
   */
  Group checkpoint(Runnable commit) {
    Group last;
    synchronized (this) {
      if (!nextReady) throw new IllegalStateException("a checkpoint before the one before it is synced");
      last = takeGroup();
      generation++;
      nextReady = false;
      journalBytes = 0;
      format.put(MARK, Long.toHexString(id) + ":" + generation);
    }
    commit.run();
    metaAtCheckpoint = store.getMetaMap().flushAndGetRoot();
    checkpointedNs = System.nanoTime();
    return last;
  }

  /** A checkpoint whose chunk is written before it returns (its last group is in it: not appended). */
  void checkpoint() {
    checkpoint(store::commit);
  }

  /**
   * A checkpoint, synced, and both files started afresh, in one go: where no write runs beside
   * it (a start). The group commit does the same in parts, the commit under its lock, the rest after.
   */
  void checkpointSynced() throws IOException {
    nextReady = true; // whatever either file holds is in the checkpoint once it is synced
    checkpoint();
    store.sync();
    start(generation);
    retire();
  }

  /**
   * Once the checkpoint that started the current generation is synced: the previous
   * generation's file starts again, empty, for the next one.
   */
  void retire() throws IOException {
    long next;
    synchronized (this) {
      next = generation + 1;
    }
    start(next);
    synchronized (this) {
      nextReady = true;
    }
  }

  /** Empties generation g's file and names g in its header. */
  private void start(long g) throws IOException {
    FileChannel file = files[(int) (g & 1)];
    file.truncate(0);
    ByteBuffer header = ByteBuffer.allocate(HEADER_BYTES).putInt(MAGIC).putLong(id).putLong(g).flip();
    while (header.hasRemaining()) file.write(header, header.position());
    file.position(HEADER_BYTES);
    file.force(false);
  }

  /** Applies the whole groups of the store's generation, then of the next; returns how many. */
  private int replay() throws IOException {
    ByteBuffer[] read = {readAll(files[0]), readAll(files[1])};
    Map<Integer, MVMap<Object, Object>> maps = new HashMap<>();
    int groups = 0;
    for (long g = generation; g <= generation + 1; g++) {
      for (ByteBuffer file : read) {
        if (file.remaining() >= HEADER_BYTES && file.getInt(0) == MAGIC && file.getLong(4) == id && file.getLong(12) == g) {
          groups += replay(file.position(HEADER_BYTES), g, maps);
        }
      }
    }
    return groups;
  }

  private static ByteBuffer readAll(FileChannel channel) throws IOException {
    long size = channel.size();
    // Never left unread: its groups were acknowledged (checkpoints keep it near 64 MB at most).
    if (size > Integer.MAX_VALUE) throw new IllegalStateException("the journal holds " + size + " bytes, more than a replay reads");
    ByteBuffer file = ByteBuffer.allocate((int) size);
    while (file.hasRemaining() && channel.read(file, file.position()) > 0) { }
    return file.flip();
  }

  /** Applies the whole groups of generation g in `file` (from its position); returns how many. */
  private int replay(ByteBuffer file, long g, Map<Integer, MVMap<Object, Object>> maps) {
    int groups = 0;
    while (file.remaining() >= 8) {
      int length = file.getInt();
      int expected = file.getInt();
      if (length <= 0 || length > file.remaining()) break; // the torn end of the last group
      ByteBuffer group = file.slice(file.position(), length);
      CRC32C crc = new CRC32C();
      crc.update(ByteBuffer.allocate(8).putLong(0, g));
      crc.update(group.duplicate());
      if ((int) crc.getValue() != expected) break;
      apply(group, maps);
      file.position(file.position() + length);
      groups++;
    }
    return groups;
  }

  private void apply(ByteBuffer group, Map<Integer, MVMap<Object, Object>> maps) {
    while (group.hasRemaining()) {
      byte op = group.get();
      int mapId = DataUtils.readVarInt(group);
      MVMap<Object, Object> map = maps.computeIfAbsent(mapId, this::openMap);
      if (op == CLEAR) {
        map.clear();
        continue;
      }
      Object key = map.getKeyType().read(group);
      if (op == PUT) map.put(key, map.getValueType().read(group));
      else if (op == REMOVE) map.remove(key);
      else throw new IllegalStateException("journal: unknown change " + op);
    }
  }

  private MVMap<Object, Object> openMap(int mapId) {
    String name = store.getMapName(mapId);
    // Groups that write to a map are acknowledged once a checkpoint that names it is synced.
    if (name == null) throw new IllegalStateException("the journal names map " + mapId + ", which the store does not have");
    return JournaledMap.open(store, name);
  }

  /** Closing after a failure: the failure is what is reported. */
  private static void closeQuietly(FileChannel[] files) {
    try {
      closeAll(files);
    } catch (IOException e) {
      // as said
    }
  }

  private static void closeAll(FileChannel[] files) throws IOException {
    IOException failed = null;
    for (FileChannel file : files) {
      if (file == null) continue;
      try {
        file.close();
      } catch (IOException e) {
        failed = e;
      }
    }
    if (failed != null) throw failed;
  }

  @Override
  public void close() throws IOException {
    JournaledMap.unregister(store);
    closeAll(files);
  }
}
