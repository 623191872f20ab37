// The operators' console: its live block (#live) follows the server's change stream instead of
// polling (ui/console/live.py; docs/architecture.md, "Change feed").
// - An EventSource on the block's data-live-stream says `changed` (at most once a second); the
//   block is then read again with htmx from its hx-get, the same fragment a poll reads.
// - A quiet block is read again every data-live-idle seconds anyway: what the feed does not
//   announce (workers' heartbeats, labels that time alone changes) still shows.
// - htmx's own timed poll in the block's markup is cancelled: it serves a page without this file.
// - A stream that errors repeatedly, is refused, or stays silent (a proxy that buffers it) is
//   given up for a timed poll (at least every 10 s); the stream is tried again every minute.
// - A hidden tab does not read the block again; it catches up when shown.
(function () {
  "use strict";
  var POLL_MS = 10000; // the fallback poll
  var IDLE_S = 30; // when the block names no idle time
  var READY_MS = 20000; // a stream that has not said `ready` by then is being buffered
  var RETRY_MS = 60000; // while polling: try the stream again after this
  var MAX_ERRORS = 3; // consecutive errors without a `ready` before the stream is given up
  var MARK = "X-Live-Refresh"; // on this file's reads, so htmx's own poll can be told apart

  var live = { es: null, url: null, errors: 0, polling: false, stale: false };
  var timers = { next: null, ready: null, retry: null };

  function block() {
    var el = document.getElementById("live");
    return el && el.getAttribute("hx-get") ? el : null; // a finished task's block is not live
  }

  function state(name) {
    document.documentElement.setAttribute("data-live-state", name); // for people and tests
  }

  function wait(el) {
    if (live.polling) {
      var trigger = /delay:(\d+)s/.exec(el.getAttribute("hx-trigger") || "");
      return Math.max(POLL_MS, trigger ? Number(trigger[1]) * 1000 : 0);
    }
    return 1000 * (Number(el.getAttribute("data-live-idle")) || IDLE_S);
  }

  // Read the block again now, and arm the next read in case nothing else asks for one.
  function refresh() {
    clearTimeout(timers.next);
    var el = block();
    if (!el) return;
    timers.next = setTimeout(refresh, wait(el));
    if (document.hidden) {
      live.stale = true;
      return;
    }
    live.stale = false;
    var headers = {};
    headers[MARK] = "1";
    htmx.ajax("GET", el.getAttribute("hx-get"), {
      source: el,
      target: "#live",
      swap: "outerHTML",
      headers: headers,
    });
  }

  function close() {
    if (live.es) live.es.close();
    live.es = null;
    live.url = null;
    clearTimeout(timers.ready);
    clearTimeout(timers.retry);
  }

  function giveUp() {
    close();
    live.errors = 0;
    if (!live.polling) {
      live.polling = true;
      state("polling");
      refresh(); // at once: what the stream may have missed
    }
    timers.retry = setTimeout(follow, RETRY_MS);
  }

  function open(url) {
    close();
    var es = new EventSource(url);
    live.es = es;
    live.url = url;
    timers.ready = setTimeout(giveUp, READY_MS);
    es.addEventListener("ready", function () {
      clearTimeout(timers.ready);
      live.errors = 0;
      state("stream");
      if (live.polling) {
        live.polling = false;
        refresh(); // and from now on at the idle pace
      }
    });
    es.addEventListener("changed", refresh);
    es.onerror = function () {
      // CLOSED: refused (a 404 once signed out, a 503), so the browser will not reconnect.
      live.errors += 1;
      if (es.readyState === EventSource.CLOSED || live.errors >= MAX_ERRORS) giveUp();
    };
  }

  // Follow the stream the current block names (a new block may name none, or another).
  function follow() {
    var el = block();
    var url = el && el.getAttribute("data-live-stream");
    if (!url) {
      close();
      clearTimeout(timers.next);
      return;
    }
    if (url === live.url) return;
    open(url);
    if (!timers.next) timers.next = setTimeout(refresh, wait(el));
  }

  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    var headers = evt.detail.requestConfig && evt.detail.requestConfig.headers;
    if (elt && elt.id === "live" && !(headers && headers[MARK])) evt.preventDefault();
  });
  document.addEventListener("htmx:load", function (evt) {
    if (evt.target.id === "live") follow();
  });
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && live.stale) refresh();
  });
  window.addEventListener("pagehide", close);
  window.addEventListener("pageshow", function (evt) {
    if (!evt.persisted) return; // back from the browser's page cache: its stream was closed
    follow();
    refresh();
  });

  // A one-time link shown once (a new team's admin invitation): focusing it selects it all.
  document.addEventListener("focusin", function (evt) {
    var el = evt.target;
    if (el && el.hasAttribute && el.hasAttribute("data-select-on-focus")) el.select();
  });

  follow();
})();
