package runhook.embedded;

/**
 * Ends a checkpoint's hold on the exclusive side of the commit lock as soon as its MVStore
 * commit has taken its snapshot, before it writes it. An MVStore commit first takes the root of
 * every changed map (pages are immutable: a root is a snapshot), then serializes the pages under
 * them on the committing thread; the first page of ours it serializes (its keys or values, in
 * {@link ValueType}) tells that the roots are taken. Commands then go on while the pages are
 * written, and the commit still holds whole commands only. Held to the end of the commit when
 * no page of ours is written.
 */
final class CommitSnapshot {
  private static final ThreadLocal<Runnable> AFTER = new ThreadLocal<>();

  private CommitSnapshot() {}

  /** Runs `release` (once) when this thread's commit starts writing pages, or at `end`. */
  static void releaseWhenTaken(Runnable release) {
    AFTER.set(release);
  }

  /** A page is being serialized on this thread: the snapshot is taken. */
  static void pagesBeingWritten() {
    Runnable release = AFTER.get();
    if (release != null) {
      AFTER.remove();
      release.run();
    }
  }

  /** The commit ended (or failed): released if it was not yet. */
  static void end() {
    pagesBeingWritten();
  }
}
