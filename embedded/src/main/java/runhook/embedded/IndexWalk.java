package runhook.embedded;

import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.bson.Document;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.Spliterator;
import java.util.Spliterators;
import java.util.function.Function;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * The documents a plan's walk yields: its intervals in order, entry by entry, each document
 * fetched when it is asked for (so a limit stops the walk) and once. {@link #pause} lets go of
 * the index between a cursor's batches (holding an MVStore cursor would keep the version it
 * read in memory); the next read goes on from the last entry read.
 */
final class IndexWalk<P> implements Iterator<Document> {
  private final QueryPlanner.Plan plan;
  private final Function<P, Document> fetch;
  private final IndexedQueries.Execution execution;
  private final List<QueryPlanner.Interval> intervals;
  private final Set<Object> seen;
  private int interval = -1;
  private Iterator<Map.Entry<KeyValue, Object>> entries = Collections.emptyIterator();
  private KeyValue last;
  private boolean paused;
  private Document ahead;
  private Object aheadPosition;
  private Object position;

  IndexWalk(QueryPlanner.Plan plan, Function<P, Document> fetch, IndexedQueries.Execution execution) {
    this.plan = plan;
    this.fetch = fetch;
    this.execution = execution;
    this.intervals = new ArrayList<>(plan.intervals());
    if (plan.descending()) Collections.reverse(intervals);
    this.seen = plan.mayRepeat() ? new HashSet<>() : null;
  }

  QueryPlanner.Plan plan() {
    return plan;
  }

  /** Lets go of the index until the next read. */
  void pause() {
    paused = true;
    entries = Collections.emptyIterator();
  }

  /** Just after (or, walking down, just before) the last entry read. */
  private Iterator<Map.Entry<KeyValue, Object>> resume(QueryPlanner.Interval i) {
    List<Object> at = new ArrayList<>();
    for (Object v : last) at.add(v);
    at.add(plan.descending() ? IndexOrder.MIN : IndexOrder.MAX);
    KeyValue from = new KeyValue(at);
    return plan.descending() ? plan.index().entries().range(i.low(), from, true) : plan.index().entries().range(from, i.high(), false);
  }

  @Override
  @SuppressWarnings("unchecked")
  public boolean hasNext() {
    while (ahead == null) {
      if (paused && interval >= 0 && interval < intervals.size()) entries = resume(intervals.get(interval));
      paused = false;
      while (!entries.hasNext()) {
        if (++interval >= intervals.size()) return false;
        QueryPlanner.Interval i = intervals.get(interval);
        entries = plan.index().entries().range(i.low(), i.high(), plan.descending());
      }
      Map.Entry<KeyValue, Object> entry = entries.next();
      last = entry.getKey();
      execution.keysExamined++;
      if (seen != null && !seen.add(entry.getValue())) continue;
      execution.docsExamined++;
      aheadPosition = entry.getValue();
      ahead = fetch.apply((P) aheadPosition);
    }
    return true;
  }

  @Override
  public Document next() {
    if (!hasNext()) throw new NoSuchElementException();
    Document d = ahead;
    ahead = null;
    position = aheadPosition;
    return d;
  }

  /** The position of the document {@link #next} returned last. */
  Object position() {
    return position;
  }

  Stream<Document> stream() {
    return StreamSupport.stream(Spliterators.spliteratorUnknownSize(this, Spliterator.ORDERED), false);
  }
}
