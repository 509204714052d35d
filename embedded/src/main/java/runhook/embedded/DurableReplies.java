package runhook.embedded;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import java.util.ArrayDeque;

/**
 * Holds a write's reply until its group commit is on disk, without blocking the event loop:
 * the backend marks the channel's next reply, and this handler (last in the pipeline, so the
 * first one a reply passes on its way out) parks it and sends it from the channel's event
 * loop once the commit is synced. A reply that follows a held one waits behind it. If the
 * commit failed the connection is closed: the client sees a network error, never an answer.
 */
final class DurableReplies extends ChannelOutboundHandlerAdapter {
  private record Held(Object message, ChannelPromise promise, boolean[] ready) {}

  private final ArrayDeque<Held> queue = new ArrayDeque<>();
  private GroupCommit holdNext;

  static DurableReplies of(Channel channel) {
    DurableReplies h = channel.pipeline().get(DurableReplies.class);
    if (h == null) {
      h = new DurableReplies();
      channel.pipeline().addLast(h);
    }
    return h;
  }

  void holdNextReply(GroupCommit commit) {
    holdNext = commit;
  }

  @Override
  public void write(ChannelHandlerContext ctx, Object message, ChannelPromise promise) {
    GroupCommit commit = holdNext;
    holdNext = null;
    if (commit == null && queue.isEmpty()) {
      ctx.write(message, promise);
      return;
    }
    Held held = new Held(message, promise, new boolean[] {commit == null});
    queue.add(held);
    if (commit != null) {
      commit.afterNextCommit(ok -> ctx.executor().execute(() -> {
        if (!ok) {
          ctx.close();
          return;
        }
        held.ready()[0] = true;
        while (!queue.isEmpty() && queue.peek().ready()[0]) {
          Held h = queue.poll();
          ctx.write(h.message(), h.promise());
        }
        ctx.flush();
      }));
    }
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    if (queue.isEmpty()) ctx.flush(); // else the release above flushes
  }
}
