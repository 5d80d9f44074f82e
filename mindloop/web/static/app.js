// mindloop web UI: the live part. Pages are drawn by the server; this file follows the
// server's event stream (server-sent events) and keeps the page current:
// - `entry`: a transcript entry (server-drawn HTML), appended once to its dialog's list;
// - `chunk` / `live`: text and thinking while a generation streams in this server;
// - `state` / `taskdoc`: reload the regions (`data-fragment`) that show them, unless
//   someone is typing in one (it is reloaded when they are done);
// - `reset`: too much was missed: load the page again.
// The browser resumes a dropped stream by itself, sending the last `id` it saw
// (`Last-Event-ID`); the server replays what was missed.
// Forms marked `data-async` are sent with fetch so a draft survives a refusal (said in the
// form's `role=alert` line, its fields marked `aria-invalid`); without this script they
// post and redirect like any form.
"use strict";

(() => {
  const stateBox = document.querySelector("[data-connection-state]");
  const pending = new Set();
  let flushTimer = null;

  function say(text, state) {
    if (!stateBox) return;
    stateBox.textContent = text;
    stateBox.dataset.state = state;
  }

  // ------------------------------------------------------------------ fragments

  function fragmentsFor(kind) {
    return [...document.querySelectorAll("[data-fragment]")].filter((el) =>
      (el.dataset.refreshOn || "state").split(" ").includes(kind),
    );
  }

  function typing(el) {
    const active = document.activeElement;
    if (active && el.contains(active) && active.matches("textarea, input, select")) return true;
    return [...el.querySelectorAll("textarea, input[type=text]")].some(
      (f) => f.value !== f.defaultValue,
    );
  }

  async function refresh(el) {
    if (typing(el)) {
      el.dataset.stale = "1";
      return;
    }
    let res;
    try {
      res = await fetch(el.dataset.fragment, { headers: { Accept: "text/html" } });
    } catch (err) {
      el.dataset.stale = "1";
      return;
    }
    if (!res.ok) return;
    const html = await res.text();
    if (typing(el)) {
      el.dataset.stale = "1";
      return;
    }
    // What the person opened or chose stays so (read now: they may have acted meanwhile).
    const open = [...el.querySelectorAll("details[open][id]")].map((d) => d.id);
    const selected = el.querySelector("[role=tab][aria-selected=true]");
    const tab = selected ? selected.id : null;
    el.innerHTML = html;
    delete el.dataset.stale;
    for (const id of open) {
      const d = document.getElementById(id);
      if (d && el.contains(d)) d.open = true;
    }
    setupTabs(el, tab);
  }

  function schedule(kind) {
    for (const el of fragmentsFor(kind)) pending.add(el);
    if (flushTimer === null) flushTimer = setTimeout(flush, 80);
  }

  async function flush() {
    flushTimer = null;
    const els = [...pending];
    pending.clear();
    for (const el of els) await refresh(el);
  }

  document.addEventListener("focusout", () => {
    setTimeout(() => {
      for (const el of document.querySelectorAll("[data-fragment][data-stale]")) {
        if (!typing(el)) refresh(el);
      }
    }, 0);
  });

  // ------------------------------------------------------------------ transcripts

  function byData(name, value) {
    return document.querySelector(`[${name}="${CSS.escape(value)}"]`);
  }

  function liveBox(dialogId) {
    return byData("data-live", dialogId);
  }

  function clearLive(dialogId) {
    const box = liveBox(dialogId);
    if (!box) return;
    box.hidden = true;
    box.querySelector("[data-live-text]").textContent = "";
    box.querySelector("[data-live-thinking]").textContent = "";
    box.querySelector("[data-live-who]").textContent = "";
  }

  const COMMITTED = new Set(["assistant", "thinking", "tool_call"]);

  function addEntry(item) {
    const list = byData("data-transcript", item.dialog_id);
    if (!list) return;
    if (COMMITTED.has(item.message_kind) || item.log === "events") clearLive(item.dialog_id);
    if (document.getElementById(item.entry_id)) return;
    const html = item.html.trim();
    if (!html) return;
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    list.append(tpl.content);
  }

  function addChunk(item) {
    const box = liveBox(item.dialog_id);
    if (!box) return;
    box.hidden = false;
    const target = item.stream === "text" ? "[data-live-text]" : "[data-live-thinking]";
    box.querySelector(target).textContent += item.text;
  }

  function liveEvent(item) {
    const box = liveBox(item.dialog_id);
    if (!box) return;
    if (item.what === "generation_restart") {
      box.querySelector("[data-live-text]").textContent = "";
      box.querySelector("[data-live-thinking]").textContent = "";
      return;
    }
    box.hidden = false;
    box.querySelector("[data-live-who]").textContent =
      `@${item.member} is answering (${item.model})…`;
  }

  // ------------------------------------------------------------------ the stream

  function seen(ev) {
    // The position the browser will send back as Last-Event-ID if the stream drops.
    if (ev.lastEventId) document.body.dataset.streamSeen = ev.lastEventId;
  }

  function connect(url) {
    const source = new EventSource(url);
    source.addEventListener("open", () => say("live", "open"));
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) say("disconnected: reload the page", "closed");
      else say("reconnecting…", "retry");
    });
    source.addEventListener("hello", (ev) => {
      // Where this stream started, and from what: `last-event-id` after a reconnect.
      const hello = JSON.parse(ev.data);
      document.body.dataset.streamFrom = hello.from;
      document.body.dataset.streamPosition = hello.position;
      seen(ev);
    });
    source.addEventListener("state", () => schedule("state"));
    source.addEventListener("taskdoc", (ev) => {
      seen(ev);
      schedule("taskdoc");
    });
    source.addEventListener("entry", (ev) => {
      seen(ev);
      addEntry(JSON.parse(ev.data));
    });
    source.addEventListener("mark", seen);
    source.addEventListener("chunk", (ev) => addChunk(JSON.parse(ev.data)));
    source.addEventListener("live", (ev) => liveEvent(JSON.parse(ev.data)));
    source.addEventListener("reset", () => location.reload());
    window.mindloopStream = source; // for people debugging (and the browser tests)
  }

  // ------------------------------------------------------------------ forms

  function described(form, error) {
    // The fields a form's error message describes (`aria-describedby` names it).
    if (!error || !error.id) return [];
    return [...form.querySelectorAll("[aria-describedby]")].filter((f) =>
      f.getAttribute("aria-describedby").split(/\s+/).includes(error.id),
    );
  }

  function clearSent(form, sent) {
    // After a form was sent, its fields go back to their defaults, except what was typed
    // or chosen while the request was under way (the next message is not lost).
    for (const el of form.elements) {
      if (!el.name || el.type === "hidden" || el.type === "submit") continue;
      if (el.type === "checkbox" || el.type === "radio") {
        if (el.checked === sent.getAll(el.name).includes(el.value)) el.checked = el.defaultChecked;
      } else if (el instanceof HTMLSelectElement) {
        if (el.value === sent.get(el.name)) {
          for (const o of el.options) o.selected = o.defaultSelected;
        }
      } else if (el.value === sent.get(el.name)) {
        el.value = el.defaultValue;
      }
    }
  }

  document.addEventListener("submit", async (ev) => {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-async")) return;
    ev.preventDefault();
    const error = form.querySelector("[data-form-error]");
    if (form.elements.back) form.elements.back.value = location.pathname + location.search;
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    form.setAttribute("aria-busy", "true");
    const sent = new FormData(form);
    try {
      const res = await fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(sent),
        headers: { Accept: "application/json" },
      });
      const data = await res.json().catch(() => ({ error: `the server answered ${res.status}` }));
      if (!res.ok) {
        if (error) error.textContent = data.error || `the server answered ${res.status}`;
        const fields = described(form, error);
        for (const f of fields) f.setAttribute("aria-invalid", "true");
        if (fields.length) fields[0].focus(); // the refusal is read with the field
        return;
      }
      if (error) error.textContent = "";
      for (const f of described(form, error)) f.removeAttribute("aria-invalid");
      const next = new URL(data.location, location.href);
      if (next.pathname !== location.pathname) {
        location.assign(next.href);
        return;
      }
      clearSent(form, sent);
      const details = form.closest("details");
      if (details) details.open = false;
      const region = form.closest("[data-fragment]");
      if (region) refresh(region);
    } catch (err) {
      if (error) error.textContent = `not sent: ${err}`;
    } finally {
      if (button) button.disabled = false;
      form.removeAttribute("aria-busy");
    }
  });

  // ------------------------------------------------------------------ tabs

  function selectTab(tab, focus) {
    const list = tab.closest("[role=tablist]");
    for (const t of list.querySelectorAll("[role=tab]")) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      const panel = document.getElementById(t.getAttribute("aria-controls"));
      if (panel) panel.hidden = !on;
    }
    if (focus) tab.focus();
  }

  function setupTabs(root, keep) {
    for (const list of root.querySelectorAll("[role=tablist]")) {
      const tabs = [...list.querySelectorAll("[role=tab]")];
      tabs.forEach((tab, i) => {
        tab.addEventListener("click", () => selectTab(tab, false));
        tab.addEventListener("keydown", (ev) => {
          const step = { ArrowRight: 1, ArrowLeft: -1 }[ev.key];
          if (step) selectTab(tabs[(i + step + tabs.length) % tabs.length], true);
          else if (ev.key === "Home") selectTab(tabs[0], true);
          else if (ev.key === "End") selectTab(tabs[tabs.length - 1], true);
          else return;
          ev.preventDefault();
        });
      });
      const kept = keep ? tabs.find((t) => t.id === keep) : null;
      const first = kept || tabs.find((t) => t.getAttribute("aria-selected") === "true") || tabs[0];
      if (first) selectTab(first, false);
    }
  }

  setupTabs(document, null);
  const url = document.body.dataset.stream;
  if (url) connect(url);
})();
