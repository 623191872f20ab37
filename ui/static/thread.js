// A ticket page's conversation, kept current (ui/ticket_live.py, ui/thread_routes.py).
// - An EventSource on /tickets/{id}/live says `changed`; the page then asks /tickets/{id}/thread
//   for what is newer than it shows (after: its newest message, h: its newest history entry,
//   d: messages whose e-mails are under way, at: when it last read) and appends that. The stream
//   carries no data, so what the page gets is what the ordinary route lets this person see.
// - One catch-up at a time; news during one asks again once it is done. A reconnected stream
//   asks too (what changed while it was away).
// - The reply form's `after` and `h` follow what the page shows, so a post's answer brings only
//   the rest; a message that both answers brought (a race) is kept once.
// - The internal-note toggle switches the form's button labels (the server renders the first).
(function () {
  "use strict";
  var MAX_LISTED = 60; // message ids `d` may name (ui/thread_routes.py MAX_LISTED)

  function thread() {
    return document.getElementById("thread");
  }

  function newest(attr) {
    var most = 0;
    var found = document.querySelectorAll("#thread-items [" + attr + "]");
    for (var i = 0; i < found.length; i++) {
      var n = Number(found[i].getAttribute(attr)) || 0;
      if (n > most) most = n;
    }
    return most;
  }

  function tidy() {
    var seen = {};
    var items = document.querySelectorAll("#thread-items > [id]");
    for (var i = 0; i < items.length; i++) {
      if (seen[items[i].id]) items[i].parentNode.removeChild(items[i]);
      else seen[items[i].id] = true;
    }
    var form = document.querySelector("form[data-thread-form]");
    if (!form) return;
    var after = form.querySelector("input[name=after]");
    var h = form.querySelector("input[name=h]");
    if (after) after.value = String(Math.max(Number(after.value) || 0, newest("data-msg-id")));
    if (h) h.value = String(Math.max(Number(h.value) || 0, newest("data-change-id")));
  }

  var busy = false;
  var again = false;

  function catchUp() {
    var el = thread();
    if (!el || !window.htmx) return;
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    again = false;
    var under = document.querySelectorAll("#thread-items [data-under-way]");
    var d = [];
    for (var i = 0; i < under.length && d.length < MAX_LISTED; i++) {
      d.push(under[i].getAttribute("data-msg-id"));
    }
    var url = "/tickets/" + encodeURIComponent(el.dataset.ticket) + "/thread" +
      "?after=" + newest("data-msg-id") + "&h=" + newest("data-change-id") +
      "&at=" + (Number(el.dataset.at) || 0) + (d.length ? "&d=" + d.join(",") : "");
    var done = function () {
      busy = false;
      if (again) catchUp();
    };
    htmx.ajax("GET", url, { source: el, target: "#thread-items", swap: "beforeend" }).then(done, done);
  }

  document.addEventListener("htmx:afterRequest", function (evt) {
    var el = thread();
    var xhr = evt.detail.xhr;
    if (!el || evt.detail.elt !== el || !xhr) return;
    var at = xhr.getResponseHeader("X-Thread-At");
    if (at) el.dataset.at = at;
  });

  document.addEventListener("htmx:afterSettle", function () {
    if (thread()) tidy();
  });

  var source = null;

  function listen() {
    var el = thread();
    if (!el || source || !window.EventSource) return;
    var first = true;
    source = new EventSource("/tickets/" + encodeURIComponent(el.dataset.ticket) + "/live");
    source.addEventListener("ready", function () {
      if (first) first = false;
      else catchUp();
    });
    source.addEventListener("changed", catchUp);
  }

  document.addEventListener("change", function (evt) {
    var box = evt.target;
    if (!box || box.name !== "internal" || !box.closest) return;
    var form = box.closest("form[data-thread-form]");
    if (!form) return;
    var parts = form.querySelectorAll(".as-reply, .as-note");
    for (var i = 0; i < parts.length; i++) {
      parts[i].hidden = parts[i].classList.contains("as-reply") ? box.checked : !box.checked;
    }
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", listen);
  else listen();
})();
