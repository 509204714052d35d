package runhook.embedded;

/**
 * Ends a group commit's hold on the exclusive side of the commit lock as soon as its MVStore
 * commit has taken its snapshot, before it serializes and writes it. An MVStore commit first
 * takes the root of every changed map (a page is never changed once in a tree: every write
 * copies it, so a root is a snapshot), then serializes the pages under them on the committing
 * thread; the first page of ours it serializes (its keys or values, in {@link ValueType} or
 * {@link H2IndexEntries.KeyType}) tells that every root is taken. Writes then go on while the
 * pages are written, into the next commit, and each commit still holds whole writes. H2's own
 * background writer stores while writers go on in the same way. Held to the end of the commit
 * when it writes no page of ours.
 */
final class CommitSnapshot {
  private static final ThreadLocal<Runnable> RELEASE = new ThreadLocal<>();

  private CommitSnapshot() {}

  /** Runs `release` once: when this thread's commit starts serializing pages, or at {@link #end}. */
  static void releaseWhenTaken(Runnable release) {
    RELEASE.set(release);
  }

  /** A page is being serialized on this thread: if a commit waits for that, its snapshot is taken. */
  static void pagesBeingWritten() {
    Runnable release = RELEASE.get();
    if (release != null) {
      RELEASE.remove();
      release.run();
    }
  }

  /** The commit ended (or failed): released if it was not yet. */
  static void end() {
    pagesBeingWritten();
  }
}
