package runhook.embedded;

import de.bwaldvogel.mongo.bson.Document;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.zip.CRC32C;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.WriteBuffer;

/**
 * A write-ahead journal of document writes, beside the MVStore file, as MongoDB's: a group
 * commit appends the group's records and syncs them (a few KB), where an MVStore commit
 * rewrites every page the group changed and its path to its map's root (tens of KB, more as
 * the trees deepen). The store itself is committed now and then (a checkpoint), which writes a
 * page changed by many groups once.
 *
 * Each record is one document's insert (with the document), update (with the new document) or
 * removal, by its collection and position, appended in its collection's lock, so that a
 * collection's records are in the order of its changes. Its sequence number goes into the
 * store's {@link #LSN_MAP} with it: whatever commits the store (a checkpoint, a close, a
 * compaction's copy) records the last record it holds, and opening replays the ones after it
 * ({@link #replay}). Writes of anything else (collections, indexes, drops) ask for a checkpoint
 * before they are answered ({@link #needCheckpoint}).
 *
 * The file is written from its start again after each checkpoint is synced; a record is
 * (length, CRC-32C, sequence number, body), and a replay stops at the first record that is
 * torn, fails its checksum or does not follow the one before (an older pass's leftovers).
 */
final class Journal implements AutoCloseable {
  static final String LSN_MAP = "$runhook-journal";
  private static final String LSN_KEY = "lsn";
  static final byte INSERT = 1, UPDATE = 2, REMOVE = 3;
  /** length + CRC + sequence number */
  private static final int HEADER = 4 + 4 + 8;
  private static final int MAX_RECORD = 64 << 20;

  private final FileChannel file;
  private final MVMap<String, Long> lsns;
  private WriteBuffer pending = new WriteBuffer(1 << 16);
  private long lastLsn;
  /** Bytes written since the last checkpoint (the next write's offset). */
  private long offset;
  private volatile boolean checkpointNeeded;

  private Journal(FileChannel file, MVMap<String, Long> lsns, long lastLsn) {
    this.file = file;
    this.lsns = lsns;
    this.lastLsn = lastLsn;
  }

  static Path pathFor(String storeFileName) {
    return Path.of(storeFileName + ".journal");
  }

  /** The last record's sequence number that `store` holds (0: none). */
  static long checkpointLsn(MVStore store) {
    Long lsn = store.<String, Long>openMap(LSN_MAP).get(LSN_KEY);
    return lsn == null ? 0 : lsn;
  }

  /**
   * Calls `apply` for each record after the store's checkpoint, in order, then opens the
   * journal for appending after the last of them (which the caller commits and syncs before
   * any write is appended).
   */
  static Journal open(MVStore store, String storeFileName, RecordSink apply) {
    MVMap<String, Long> lsns = store.openMap(LSN_MAP);
    long lsn = checkpointLsn(store);
    try {
      FileChannel file = FileChannel.open(pathFor(storeFileName), StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
      try {
        long last = replay(file, lsn, apply);
        if (last != lsn) {
          lsns.put(LSN_KEY, last);
          System.out.println("applied " + (last - lsn) + " journal records written after the last checkpoint of " + storeFileName);
          System.out.flush();
        }
        return new Journal(file, lsns, last);
      } catch (RuntimeException e) {
        file.close();
        throw e;
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** One record, handed to a replay. */
  interface RecordSink {
    void apply(byte type, String database, String collection, Object position, Document document);
  }

  private static long replay(FileChannel file, long after, RecordSink apply) throws IOException {
    long size = file.size();
    ByteBuffer all = ByteBuffer.allocate((int) Math.min(size, Integer.MAX_VALUE - 8));
    while (all.hasRemaining() && file.read(all, all.position()) > 0) {}
    all.flip();
    long last = after;
    CRC32C crc = new CRC32C();
    while (all.remaining() >= HEADER) {
      int length = all.getInt(all.position());
      if (length < 8 || length > MAX_RECORD || all.remaining() < 8 + length) break;
      int expected = all.getInt(all.position() + 4);
      crc.reset();
      crc.update(all.slice(all.position() + 8, length));
      if ((int) crc.getValue() != expected) break;
      ByteBuffer body = all.slice(all.position() + 8, length);
      long lsn = body.getLong();
      if (last == after && lsn <= after) { // a record the store holds already
        all.position(all.position() + 8 + length);
        continue;
      }
      if (last == after && lsn != after + 1) {
        throw new IllegalStateException("the journal's records go on from " + lsn + " but the store holds them up to " + after + " only");
      }
      if (lsn != last + 1) break; // a leftover of an older pass
      byte type = body.get();
      String database = (String) ValueType.INSTANCE.read(body);
      String collection = (String) ValueType.INSTANCE.read(body);
      Object position = ValueType.INSTANCE.read(body);
      Document document = type == REMOVE ? null : (Document) ValueType.INSTANCE.read(body);
      apply.apply(type, database, collection, position, document);
      last = lsn;
      all.position(all.position() + 8 + length);
    }
    return last;
  }

  /**
   * Appends a record (in its collection's lock, before the change is made) and records its
   * sequence number in the store.
   */
  synchronized void append(byte type, String database, String collection, Object position, Document document) {
    long lsn = lastLsn + 1;
    int start = pending.position();
    pending.putInt(0).putInt(0).putLong(lsn).put(type);
    ValueType.INSTANCE.write(pending, database);
    ValueType.INSTANCE.write(pending, collection);
    ValueType.INSTANCE.write(pending, position);
    if (document != null) ValueType.INSTANCE.write(pending, document);
    int length = pending.position() - start - 8;
    ByteBuffer bytes = pending.getBuffer();
    CRC32C crc = new CRC32C();
    crc.update(bytes.slice(start + 8, length));
    bytes.putInt(start, length).putInt(start + 4, (int) crc.getValue());
    lsns.put(LSN_KEY, lsn);
    lastLsn = lsn;
  }

  /** Asks for the next commit to be a checkpoint (a write the records do not describe). */
  void needCheckpoint() {
    checkpointNeeded = true;
  }

  boolean checkpointNeeded() {
    return checkpointNeeded;
  }

  /** Bytes written since the last checkpoint. */
  synchronized long written() {
    return offset;
  }

  /**
   * The records appended so far, to be written by {@link #write}; null if none. Called while
   * no write runs (a checkpoint: the store holds them), or by the group commit for its group,
   * whose writers appended theirs before they waited.
   */
  synchronized ByteBuffer take() {
    if (pending.position() == 0) return null;
    ByteBuffer bytes = pending.getBuffer().flip();
    ByteBuffer copy = ByteBuffer.allocate(bytes.remaining()).put(bytes).flip();
    pending.clear();
    if (pending.capacity() > (4 << 20)) pending = new WriteBuffer(1 << 16); // let a large group's buffer go
    return copy;
  }

  /** At a checkpoint, while no write runs: the records so far are in the store. */
  synchronized void checkpointTaken() {
    take();
    checkpointNeeded = false;
  }

  /** After the checkpoint is synced: the next records go to the file's start. */
  synchronized void checkpointSynced() {
    offset = 0;
  }

  /** Writes and syncs records from {@link #take} (the group commit's thread only). */
  void writeAndSync(ByteBuffer records) throws IOException {
    long at;
    synchronized (this) {
      at = offset;
      offset += records.remaining();
    }
    while (records.hasRemaining()) at += file.write(records, at);
    file.force(false);
  }

  @Override
  public void close() throws IOException {
    file.close();
  }
}
