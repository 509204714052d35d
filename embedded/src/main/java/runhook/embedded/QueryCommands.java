package runhook.embedded;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.backend.DatabaseResolver;
import de.bwaldvogel.mongo.backend.QueryParameters;
import de.bwaldvogel.mongo.backend.aggregation.Aggregation;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.Oplog;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * The database commands that mongo-java-server answers without the indexes, answered with them:
 * an aggregation that begins with {@code $match} reads only what the match's index plan yields
 * (countDocuments is one; a count its index covers reads no document: {@link CoveredCount}), and {@code explain} says which index a query uses and how much it
 * read, in MongoDB's shape (queryPlanner.winningPlan with COLLSCAN or IXSCAN stages,
 * executionStats with nReturned, totalKeysExamined, totalDocsExamined).
 */
final class QueryCommands {
  private QueryCommands() {}

  /** The answer to {@code command}, or null to leave it to mongo-java-server. */
  static Document handle(MongoDatabase database, String command, Document query, DatabaseResolver resolver, Oplog oplog) {
    String name = command.toLowerCase(Locale.ROOT);
    if (name.equals("explain")) return explain(database, query);
    if (name.equals("aggregate")) return aggregate(database, query, resolver, oplog);
    return null;
  }

  @SuppressWarnings("unchecked")
  private static List<Document> pipeline(Object stages) {
    if (!(stages instanceof List<?> list)) return null;
    for (Object s : list) if (!(s instanceof Document)) return null;
    return (List<Document>) list;
  }

  private static Document aggregate(MongoDatabase database, Document query, DatabaseResolver resolver, Oplog oplog) {
    List<Document> pipeline = pipeline(query.get("pipeline"));
    if (pipeline == null || pipeline.isEmpty() || !(pipeline.get(0).get("$match") instanceof Document match)) return null;
    if (pipeline.stream().anyMatch(s -> s.containsKey("$changeStream") || s.containsKey("$out") || s.containsKey("$merge"))) return null;
    String collectionName = query.get("aggregate").toString();
    MongoCollection<?> collection = database.resolveCollection(collectionName, false);
    if (collection == null) return null;
    Aggregation rest = Aggregation.fromPipeline(new ArrayList<>(pipeline.subList(1, pipeline.size())), resolver, database, collection, oplog);
    rest.validate(query);
    CoveredCount.Counted counted = CoveredCount.answer(collection, pipeline);
    if (counted != null) return cursorResponse(database.getDatabaseName() + "." + collectionName, counted.result());
    Stream<Document> matched = StreamSupport.stream(collection.handleQuery(new QueryParameters(new Document("$query", match), 0, 0)).spliterator(), false);
    return cursorResponse(database.getDatabaseName() + "." + collectionName, rest.runStages(matched));
  }

  private static Document cursorResponse(String namespace, List<Document> documents) {
    Document cursor = new Document("id", 0L).append("ns", namespace).append("firstBatch", documents);
    return new Document("cursor", cursor).append("ok", 1.0);
  }

  /** The query a command makes: filter, sort, skip, limit. */
  private record Query(String collection, Document filter, Document sort, int skip, int limit) {}

  private static Document explain(MongoDatabase database, Document command) {
    if (!(command.get("explain") instanceof Document inner) || inner.isEmpty()) {
      throw new MongoServerError(9, "FailedToParse", "explain takes a command document");
    }
    Query q = queryOf(inner);
    MongoCollection<?> collection = database.resolveCollection(q.collection(), false);
    List<Document> stages = inner.keySet().iterator().next().equalsIgnoreCase("aggregate") ? pipeline(inner.get("pipeline")) : null;
    CoveredCount.Counted counted = collection != null && stages != null && !stages.isEmpty() ? CoveredCount.answer(collection, stages) : null;
    IndexedQueries.Execution execution = new IndexedQueries.Execution();
    long returned = 0;
    if (counted != null) {
      // A covered count: its index's entries, no document (no FETCH stage, as MongoDB's).
      QueryPlanner.Plan plan = counted.plan();
      execution.indexName = plan.index().getName();
      execution.keyPattern = plan.index().getKeys().stream().map(k -> k.getKey()).toList();
      execution.intervals = plan.intervals().size();
      execution.keysExamined = counted.entries();
      returned = counted.result().size();
    } else if (collection != null) {
      Document selector = new Document("$query", q.filter());
      if (q.sort() != null) selector.put("$orderby", q.sort());
      Iterable<Document> result = IndexedQueries.recording(execution, () -> collection.handleQuery(new QueryParameters(selector, q.skip(), q.limit())));
      for (Document ignored : result) returned++;
    } else {
      execution.scanned = false; // EOF: nothing to read
    }
    Document winningPlan;
    if (execution.indexName != null) {
      Document keyPattern = new Document();
      for (String k : execution.keyPattern) keyPattern.put(k, 1);
      Document ixscan = new Document("stage", "IXSCAN").append("indexName", execution.indexName).append("keyPattern", keyPattern)
          .append("direction", execution.descending ? "backward" : "forward").append("intervals", execution.intervals);
      winningPlan = counted != null ? ixscan : new Document("stage", "FETCH").append("inputStage", ixscan);
    } else {
      winningPlan = new Document("stage", collection == null ? "EOF" : "COLLSCAN");
    }
    Document queryPlanner = new Document("namespace", database.getDatabaseName() + "." + q.collection()).append("parsedQuery", q.filter())
        .append("winningPlan", winningPlan).append("rejectedPlans", List.of());
    Document stats = new Document("executionSuccess", true).append("nReturned", returned)
        .append("totalKeysExamined", execution.keysExamined).append("totalDocsExamined", execution.docsExamined);
    return new Document("queryPlanner", queryPlanner).append("executionStats", stats).append("ok", 1.0);
  }

  private static Document document(Object value) {
    return value instanceof Document d ? d : new Document();
  }

  private static int number(Object value) {
    return value instanceof Number n ? Math.abs(n.intValue()) : 0;
  }

  private static Query queryOf(Document inner) {
    String command = inner.keySet().iterator().next();
    String collection = String.valueOf(inner.get(command));
    switch (command.toLowerCase(Locale.ROOT)) {
      case "find":
        return new Query(collection, document(inner.get("filter")), (Document) inner.get("sort"), number(inner.get("skip")), number(inner.get("limit")));
      case "findandmodify":
        return new Query(collection, document(inner.get("query")), (Document) inner.get("sort"), 0, 1);
      case "count":
      case "distinct":
        return new Query(collection, document(inner.get("query")), null, number(inner.get("skip")), number(inner.get("limit")));
      case "aggregate": {
        List<Document> stages = pipeline(inner.get("pipeline"));
        Document match = stages != null && !stages.isEmpty() ? document(stages.get(0).get("$match")) : new Document();
        return new Query(collection, match, null, 0, 0);
      }
      case "update":
      case "delete": {
        List<Document> ops = pipeline(inner.get(command.toLowerCase(Locale.ROOT).equals("update") ? "updates" : "deletes"));
        if (ops == null || ops.isEmpty()) throw new MongoServerError(9, "FailedToParse", "explain of " + command + " needs one statement");
        Document op = ops.get(0);
        return new Query(collection, document(op.get("q")), (Document) op.get("sort"), 0, number(op.get("limit")));
      }
      default:
        throw new MongoServerError(115, "CommandNotSupported", "explain of " + command + " is not supported by the embedded server");
    }
  }
}
