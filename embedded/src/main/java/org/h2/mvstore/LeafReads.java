package org.h2.mvstore;

import java.lang.ref.WeakReference;

/**
 * Look-ups in one map that remember the leaf page of the last one: a query walking an index
 * fetches its documents one by one, mostly neighbours in the documents map (a stream's log
 * entries, the runs of a page), and finds them in that leaf without a descent from the root.
 * Through the map, each look-up asks the page cache for every page on its path, and a leaf that
 * a long read leaves out of the cache ({@link ScanReads}) would be read from the file and
 * decoded once per document on it. The leaf is valid while the map's root is the one it was
 * read under (pages reachable from a root never change: a write copies them). Not thread-safe:
 * one per walk. Written against H2 2.3.232 (Page.binarySearch is package-private).
 */
public final class LeafReads<K, V> {
  private final MVMap<K, V> map;
  /**
   * The root the leaf was read under, weakly: a cursor left open between batches must not keep
   * a version of the map in memory (an unsaved root holds every page changed since it).
   */
  private WeakReference<Page<K, V>> root = new WeakReference<>(null);
  private Page<K, V> leaf;

  public LeafReads(MVMap<K, V> map) {
    this.map = map;
  }

  /** The value for `key`, or null, as {@link MVMap#get} answers. */
  public V get(K key) {
    Page<K, V> current = map.getRootPage();
    if (current != root.get()) {
      root = new WeakReference<>(current);
      leaf = null;
    }
    if (leaf != null) {
      int index = leaf.binarySearch(key);
      if (index >= 0) return leaf.getValue(index);
      int insertAt = -index - 1;
      // Between two of its keys: no other leaf holds it. Before its first or past its last: look it up.
      if (insertAt > 0 && insertAt < leaf.getKeyCount()) return null;
    }
    Page<K, V> p = current;
    while (!p.isLeaf()) {
      int index = p.binarySearch(key);
      index = index < 0 ? -index - 1 : index + 1;
      p = p.getChildPage(index);
    }
    leaf = p;
    int index = p.binarySearch(key);
    return index >= 0 ? p.getValue(index) : null;
  }
}
