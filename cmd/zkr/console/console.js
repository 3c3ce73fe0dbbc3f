// zkr console's page. Plain JavaScript, no dependencies. Everything from
// the server is put in the page as text (textContent, attribute values),
// never as HTML.
"use strict";

const ROWH = 22;      // a tree row's height, px
const PAGE = 100;     // children per request
const $ = (id) => document.getElementById(id);

const state = {
  root: "/",
  view: "tree",
  token: "",
  info: null,
  selected: null,     // path
  nodes: new Map(),   // path -> TNode, the loaded ones
  top: null,          // the TNode of the root
  dirty: new Set(),   // paths whose listing must be read again
  detailsDirty: false,
  recipesDirty: true,
  stream: null,       // AbortController of the event stream
  streamState: "connecting", // the event stream: connecting, up, down
  streamWhy: "",
  conn: null,         // the console's link to ZooKeeper (the "conn" event)
  history: new Map(), // server -> [{lat, out, watches}]
};

// el makes an element: el("div", {class: "x"}, child, "text", ...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "style") Object.assign(e.style, v); // CSSOM: the CSP refuses style attributes
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const k of kids) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

// say shows text in the message bar; about, if given, is the path the
// message is about, for unsay.
function say(text, about) {
  $("msg").textContent = text || "";
  $("msg").dataset.about = about || "";
}

// unsay clears the message bar if its message is about path.
function unsay(path) { if ($("msg").dataset.about === path) say(""); }

function headers(json) {
  const h = {};
  if (state.token) h["X-Zkr-Token"] = state.token;
  if (json) h["Content-Type"] = "application/json";
  return h;
}

async function api(path, params) {
  const q = new URLSearchParams(params || {});
  const res = await fetch("/api/" + path + "?" + q, { headers: headers(false) });
  const body = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

async function post(path, body) {
  const res = await fetch("/api/" + path, { method: "POST", headers: headers(true), body: JSON.stringify(body) });
  const out = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(out.error || res.statusText);
  return out;
}

function join(parent, name) { return parent === "/" ? "/" + name : parent + "/" + name; }
function dirname(p) { const i = p.lastIndexOf("/"); return i <= 0 ? "/" : p.slice(0, i); }
function basename(p) { return p === "/" ? "/" : p.slice(p.lastIndexOf("/") + 1); }

function age(ms) {
  if (ms < 0) ms = 0;
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d" + Math.floor((s % 86400) / 3600) + "h";
}

// ---------------------------------------------------------------- the tree
//
// The tree is a virtual list: only the rows in view are in the document.
// An expanded node knows how many children it has (after its filter) and
// keeps the pages of them it has read; its expanded children are TNodes
// of their own, found by name.

class TNode {
  constructor(path, depth, row) {
    this.path = path;
    this.depth = depth;
    this.row = row || { name: basename(path), children: -1 };
    this.expanded = false;
    this.total = null;          // children, after the filter; null: unread
    this.filter = "";
    this.pages = new Map();     // page number -> [row]
    this.loading = new Set();   // page numbers being read
    this.kids = new Map();      // name -> TNode (the expanded children)
    this.kidIndex = new Map();  // name -> index in the listing
    this.gen = 0;               // bumps on each reread
  }
  // rows is how many rows the node and what is open below it take.
  rows() {
    if (!this.expanded || this.total === null) return 1;
    let n = 1 + this.total;
    for (const k of this.kids.values()) if (this.kidIndex.has(k.row.name)) n += k.rows() - 1;
    return n;
  }
  // at returns what row r (0: the node itself) of the node's block shows:
  // {node} or {parent, index}.
  at(r) {
    if (r === 0) return { node: this };
    r -= 1;
    const open = [...this.kids.values()]
      .filter((k) => this.kidIndex.has(k.row.name))
      .map((k) => [this.kidIndex.get(k.row.name), k])
      .sort((a, b) => a[0] - b[0]);
    let extra = 0;
    for (const [i, k] of open) {
      const start = i + extra;
      if (r < start) break;
      const n = k.rows();
      if (r < start + n) return k.at(r - start);
      extra += n - 1;
    }
    return { parent: this, index: r - extra };
  }
  rowAt(i) {
    const p = this.pages.get(Math.floor(i / PAGE));
    return p ? p[i % PAGE] : undefined;
  }
}

// loadPage reads a page of node's children. A listing that fails on the
// console's side (a 5xx: its ZooKeeper link is down, say) or on the way (a
// network error) is read again after a pause that doubles from 250 ms to
// 5 s, and the page says it is retrying; a node gone (404) is taken out of
// the tree instead; another refusal (4xx) is shown and not retried.
async function loadPage(node, page) {
  if (node.loading.has(page)) return;
  node.loading.add(page);
  const gen = node.gen;
  let again = false, failed = null;
  try {
    const params = { path: node.path, offset: page * PAGE, limit: PAGE, q: node.filter };
    const names = [...node.kids.keys()];
    const q = new URLSearchParams(params);
    for (const n of names) q.append("locate", n);
    let res, body;
    try {
      res = await fetch("/api/children?" + q, { headers: headers(false) });
      body = await res.json().catch(() => ({ error: res.statusText }));
    } catch (e) {
      if (gen === node.gen) failed = "the console did not answer (" + e.message + ")";
      return;
    }
    if (gen !== node.gen) return;
    if (res.status === 404) {
      gone(node);
    } else if (res.status >= 500) {
      failed = body.error || res.statusText;
    } else if (!res.ok) {
      say("listing " + node.path + ": " + (body.error || res.statusText));
    } else {
      node.total = body.total;
      node.all = body.all;
      node.pages.set(page, body.children);
      const before = node.kidIndex;
      node.kidIndex = new Map(Object.entries(body.positions || {}));
      for (const n of names) if (!node.kidIndex.has(n)) { forget(node.kids.get(n)); node.kids.delete(n); }
      // A child expanded while this listing was on its way was not asked
      // about: keep where it was, and ask again.
      for (const n of node.kids.keys()) {
        if (!names.includes(n) && before.has(n)) { node.kidIndex.set(n, before.get(n)); again = true; }
      }
      node.row.children = body.all;
      node.retry = null;
      unsay(node.path);
    }
  } finally {
    node.loading.delete(page);
    if (failed !== null) retryLater(node, page, failed);
  }
  if (again) loadPage(node, page);
  render();
}

// retryLater reads node's page again after the next pause of its backoff,
// and says so.
function retryLater(node, page, why) {
  const r = node.retry || (node.retry = { attempt: 0, bound: 250 });
  r.attempt++;
  const pause = r.bound / 2 + Math.random() * r.bound / 2;
  r.bound = Math.min(2 * r.bound, 5000);
  say(`listing ${node.path} failed: ${why}; retrying in ${(pause / 1000).toFixed(1)} s (attempt ${r.attempt})`, node.path);
  const gen = node.gen;
  setTimeout(() => { if (gen === node.gen && state.nodes.get(node.path) === node) loadPage(node, page); }, pause);
  render();
}

// gone takes a node whose listing found it deleted out of the tree: its
// parent's listing is read again; the shown subtree's root stays, empty,
// and the page says it does not exist (its creation is an event).
function gone(node) {
  node.pages.clear();
  node.total = 0;
  node.row.children = 0;
  node.retry = null;
  unsay(node.path);
  if (node === state.top) {
    say(node.path + " does not exist", node.path);
    return;
  }
  const parent = state.nodes.get(dirname(node.path));
  if (parent && parent.kids.get(node.row.name) === node) {
    parent.kids.delete(node.row.name);
    parent.kidIndex.delete(node.row.name);
    if (parent.expanded) reread(parent);
  }
  forget(node);
}

function forget(node) {
  if (!node) return;
  for (const k of node.kids.values()) forget(k);
  state.nodes.delete(node.path);
}

// reread clears what a node knows of its children and reads the first
// page again (the rows in view ask for theirs).
function reread(node) {
  node.gen++;
  node.pages.clear();
  node.loading.clear();
  loadPage(node, 0);
}

function toggle(node) {
  node.expanded = !node.expanded;
  if (node.expanded && node.total === null) loadPage(node, 0);
  render();
}

function expandRow(parent, index, row) {
  const path = join(parent.path, row.name);
  let k = parent.kids.get(row.name);
  if (!k) {
    k = new TNode(path, parent.depth + 1, row);
    parent.kids.set(row.name, k);
    state.nodes.set(path, k);
  }
  parent.kidIndex.set(row.name, index); // where it is in the listing drawn
  toggle(k);
}

function select(path) {
  state.selected = path;
  const n = state.nodes.get(path);
  $("filter").value = n ? n.filter : "";
  $("filter").disabled = !n;
  showDetails();
  render();
}

let rendering = false;
function render() {
  if (rendering || !state.top) return;
  rendering = true;
  const go = () => {
    if (!rendering) return;
    rendering = false;
    draw();
  };
  requestAnimationFrame(go);
  setTimeout(go, 100); // a hidden or throttled tab may get no animation frame
}

function draw() {
  const tree = $("tree");
  const total = state.top.rows();
  $("treespacer").style.height = total * ROWH + "px";
  const first = Math.max(0, Math.floor(tree.scrollTop / ROWH) - 5);
  const last = Math.min(total, Math.ceil((tree.scrollTop + tree.clientHeight) / ROWH) + 5);
  for (const r of [...tree.querySelectorAll(".row")]) r.remove();
  const frag = document.createDocumentFragment();
  for (let r = first; r < last; r++) {
    const at = state.top.at(r);
    let row, depth, path, node = at.node, parent = at.parent, index = at.index;
    if (node) {
      row = node.row; depth = node.depth; path = node.path;
    } else {
      row = parent.rowAt(index);
      depth = parent.depth + 1;
      if (!row) {
        loadPage(parent, Math.floor(index / PAGE));
        frag.append(el("div", {
          class: "row loading" + (parent.retry ? " retrying" : ""),
          style: { top: r * ROWH + "px", paddingLeft: depth * 16 + 16 + "px" },
        }, parent.retry ? `… retrying (attempt ${parent.retry.attempt})` : "…"));
        continue;
      }
      path = join(parent.path, row.name);
      node = parent.kids.get(row.name);
      if (node && parent.kidIndex.get(row.name) !== index) node = null;
    }
    const open = node && node.expanded;
    const hasKids = row.children > 0 || (node && node.total > 0);
    const tog = el("span", { class: "tog" }, hasKids ? (open ? "▾" : "▸") : "");
    if (hasKids) {
      tog.addEventListener("click", (ev) => {
        ev.stopPropagation();
        if (node) toggle(node); else expandRow(parent, index, row);
      });
    }
    const div = el("div", {
      class: "row" + (path === state.selected ? " selected" : ""),
      style: { top: r * ROWH + "px", paddingLeft: depth * 16 + "px" },
      "data-path": path,
      title: path,
    }, tog, row.name === "/" && depth === 0 ? path : (depth === 0 ? path : row.name),
    row.children > 0 ? el("span", { class: "n" }, row.children.toLocaleString()) : null,
    row.ephemeral ? el("span", { class: "eph" }, "ephemeral") : null);
    div.addEventListener("click", () => select(path));
    div.addEventListener("dblclick", () => { if (hasKids) { if (node) toggle(node); else expandRow(parent, index, row); } });
    frag.append(div);
  }
  tree.append(frag);
  const sel = state.nodes.get(state.selected);
  if (sel && sel.total !== null) {
    $("treecount").textContent = sel.filter
      ? `${sel.total.toLocaleString()} of ${(sel.all || 0).toLocaleString()} children`
      : `${sel.total.toLocaleString()} ${sel.total === 1 ? "child" : "children"}`;
  } else $("treecount").textContent = "";
}

// ---------------------------------------------------------- the details

let dataMode = "text";

function b64bytes(b64) {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function hexdump(bytes) {
  const lines = [];
  const n = Math.min(bytes.length, 65536);
  for (let o = 0; o < n; o += 16) {
    const chunk = bytes.slice(o, Math.min(o + 16, n));
    const hex = [...chunk].map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const asc = [...chunk].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(o.toString(16).padStart(8, "0") + "  " + hex.padEnd(48) + "  " + asc);
  }
  if (bytes.length > n) lines.push(`… ${bytes.length - n} more bytes`);
  return lines.join("\n");
}

function dataText(v) {
  const bytes = b64bytes(v.data_base64);
  if (dataMode === "hex") return hexdump(bytes);
  if (v.data === undefined) return `(${bytes.length} bytes, not UTF-8: see hex)`;
  if (dataMode === "json") {
    try { return JSON.stringify(JSON.parse(v.data), null, 2); } catch (e) { return "not JSON: " + e.message; }
  }
  return v.data;
}

async function showDetails() {
  const path = state.selected;
  const box = $("details");
  if (!path) return;
  let v;
  try {
    v = await api("node", { path });
  } catch (e) {
    if (path !== state.selected) return;
    box.replaceChildren(el("h2", {}, path), el("p", { class: "err" }, e.message));
    return;
  }
  if (path !== state.selected) return;
  // An edit in progress survives the node's refresh, with the version it
  // started from: saving it over a newer version fails, and says so.
  const old = $("setdata");
  const carry = old && old.dataset.path === path && old.value !== old.dataset.orig
    ? { value: old.value, orig: old.dataset.orig, version: Number(old.dataset.version) } : null;
  const oldACL = $("setacl");
  const aclCarry = oldACL && oldACL.dataset.path === path && oldACL.value !== oldACL.dataset.orig
    ? { value: oldACL.value, orig: oldACL.dataset.orig, version: Number(oldACL.dataset.version) } : null;
  const pre = el("pre", { class: "data", id: "nodedata" }, dataText(v));
  const tabs = el("div", { class: "dtabs" });
  for (const m of ["text", "json", "hex"]) {
    tabs.append(el("button", {
      type: "button", class: m === dataMode ? "active" : "",
      onclick: () => { dataMode = m; showDetails(); },
    }, m === "json" ? "JSON" : m[0].toUpperCase() + m.slice(1)));
  }
  const st = v.stat;
  const stat = el("table", { class: "kv" });
  for (const [k, val] of [
    ["children", st.numChildren], ["data length", st.dataLength + " bytes"], ["data version", st.dataVersion],
    ["ephemeral owner", v.owner || "none (persistent)"],
    ["created", st.ctime + " (" + st.cZxid + ")"], ["modified", st.mtime + " (" + st.mZxid + ")"],
    ["cversion", st.cversion], ["aclVersion", st.aclVersion], ["pZxid", st.pZxid],
  ]) stat.append(el("tr", {}, el("th", {}, k), el("td", { class: "mono" }, val)));
  const acl = el("table", { id: "acl" });
  acl.append(el("tr", {}, el("th", {}, "scheme"), el("th", {}, "id"), el("th", {}, "perms")));
  for (const a of v.acl || []) acl.append(el("tr", {}, el("td", {}, a.scheme), el("td", { class: "mono" }, a.id), el("td", { class: "mono" }, a.perms)));
  box.replaceChildren(...[
    el("h2", {}, path), tabs, pre,
    el("h3", {}, "Stat"), stat,
    el("h3", {}, "ACL"), v.acl_error ? el("p", { class: "err" }, v.acl_error) : acl,
    state.info && state.info.writes && !v.acl_error ? aclForm(v, aclCarry) : null,
    state.info && state.info.writes ? writeForms(v, carry) : null,
  ].filter(Boolean));
}

// act makes a write's click handler: the message bar shows its error, or
// is cleared once it succeeds.
function act(f) {
  return async () => {
    try { await f(); say(""); } catch (e) { say(e.message); }
  };
}

// saved marks the edit in the textarea id, for path, as no longer an edit
// once its text, sent, is written, so that the node's refresh shows what
// the server has. The textarea may be another than the one sent from: the
// pane, drawn again while the write was on its way, carried the edit over.
function saved(id, path, sent) {
  const t = $(id);
  if (t && t.dataset.path === path && t.value === sent) t.dataset.orig = sent;
}

// aclForm edits the node's ACL, one scheme:id:perms entry a line (as zkr
// acl set takes them); the server sets it only if the ACL is still at the
// version it was read at (an edit in progress survives the node's
// refresh, with that version, as the data's does).
function aclForm(v, carry) {
  const path = v.path;
  const orig = carry ? carry.orig : (v.acl || []).map((a) => a.scheme + ":" + a.id + ":" + a.perms).join("\n");
  const version = carry ? carry.version : v.acl_version;
  const text = el("textarea", {
    id: "setacl", "data-path": path, "data-orig": orig, "data-version": version, spellcheck: "false",
    "aria-label": "the ACL, one scheme:id:perms entry a line",
  });
  text.value = carry ? carry.value : orig;
  return el("div", { class: "writes" },
    el("div", { class: "hint" }, "Edit the ACL: one entry a line, scheme:id:perms (world:anyone:r, digest:user:HASH:cdrwa, ip:10.0.0.0/8:r, auth::cdrwa)"),
    el("div", {}, text, el("button", {
      type: "button", id: "aclbtn",
      onclick: act(async () => {
        const sent = text.value;
        await post("acl", { path, acl: sent.split("\n").map((l) => l.trim()).filter((l) => l !== ""), version });
        saved("setacl", path, sent);
        showDetails(); // an ACL's change fires no watch: read it again here
      }),
    }, "Set ACL (ACL version " + version + ")")),
  );
}

function writeForms(v, carry) {
  const path = v.path;
  const orig = carry ? carry.orig : (v.data === undefined ? "" : v.data);
  const version = carry ? carry.version : v.version;
  const data = el("textarea", { id: "setdata", "data-path": path, "data-orig": orig, "data-version": version });
  data.value = carry ? carry.value : orig;
  const childName = el("input", { id: "childname", placeholder: "name" });
  const childData = el("input", { id: "childdata", placeholder: "data" });
  const mode = el("select", { id: "childmode" }, el("option", {}, "persistent"), el("option", {}, "sequential"), el("option", {}, "container"));
  const recursive = el("input", { type: "checkbox", id: "recursive" });
  const confirm = el("input", { id: "confirmpath", placeholder: "type the path to delete it with its children", size: 40 });
  return el("div", { class: "writes" },
    el("h3", {}, "Change"),
    el("div", {}, data, el("button", {
      type: "button", id: "setbtn", disabled: v.data === undefined,
      onclick: act(async () => {
        const sent = data.value;
        await post("set", { path, data: sent, version });
        saved("setdata", path, sent);
        showDetails();
      }),
    }, "Save data (version " + version + ")")),
    el("div", {}, "New child ", childName, " ", childData, " ", mode, " ", el("button", {
      type: "button", id: "createbtn",
      onclick: act(async () => {
        if (!childName.value) throw new Error("the new child needs a name");
        await post("create", { path: join(path, childName.value), data: childData.value, mode: mode.value });
      }),
    }, "Create")),
    path === "/" ? null : el("div", {}, el("label", {}, recursive, " with its children"), " ", confirm, " ", el("button", {
      type: "button", id: "deletebtn",
      onclick: act(async () => {
        const body = { path, recursive: recursive.checked };
        if (recursive.checked) {
          if (confirm.value !== path) throw new Error("type " + path + " to delete it with its children");
          body.confirm = confirm.value;
        } else body.version = v.version;
        await post("delete", body);
        select(dirname(path));
      }),
    }, "Delete")),
  );
}

// ---------------------------------------------------------- the recipes

let recipes = null;
let recipesAt = 0;
let recipesLoading = false;

async function loadRecipes() {
  if (recipesLoading) { state.recipesDirty = true; return; }
  recipesLoading = true;
  state.recipesDirty = false;
  // An answer for another subtree than the one shown now (it changed
  // while the request was on its way) is dropped, and the shown one read.
  const root = state.root;
  try {
    const r = await api("recipes", { path: root });
    if (root === state.root) {
      recipes = r;
      recipesAt = Date.now();
      drawRecipes();
    } else state.recipesDirty = true;
  } catch (e) {
    if (root === state.root) $("recipes").replaceChildren(el("p", { class: "err" }, e.message));
    else state.recipesDirty = true;
  } finally {
    recipesLoading = false;
  }
  if (state.recipesDirty && state.view === "recipes") loadRecipes();
}

// LINES are the recipes whose entries are a line of contenders, with
// fencing tokens; SINCE and IDLABEL say what an entry's age and data are,
// by its kind.
const LINES = new Set(["lock", "read/write lock", "election", "mixed"]);
const SINCE = { lease: "held", member: "joined", instance: "registered", participant: "entered", item: "queued", acquirer: "queued" };
const LAYOUTS = { curator: "Curator's layout (Curator, zkr)", kazoo: "kazoo's layout" };
const IDLABEL = { item: "data", member: "data", instance: "at", participant: "data", lease: "id" };

function drawRecipes() {
  const r = recipes;
  if (!r) return;
  const hint = [];
  hint.push(r.lines.length ? `${r.lines.length} recipe${r.lines.length > 1 ? "s" : ""} under ${r.path}` : `no lock, read/write lock, election, semaphore, queue, group, service or double barrier under ${r.path}`);
  if (r.truncated) hint.push("(only the first ones shown: choose a smaller subtree)");
  if (r.lines.length && !r.sessions_known) hint.push("orphans not looked for: " + r.sessions_unknown_because);
  $("recipeshint").textContent = hint.join(" ");
  const since = Date.now() - recipesAt;
  const out = [];
  for (const line of r.lines) {
    const list = el("ol", { class: "chain" + (LINES.has(line.recipe) ? "" : " set") });
    for (const c of line.contenders) {
      const orphan = c.orphaned === true;
      const waitsFor = c.waits_for ? line.contenders[c.waits_for - 1] : null;
      const meta = el("div", { class: "meta" },
        el("span", {}, "kind " + c.kind),
        c.layout ? el("span", { class: "layout" }, LAYOUTS[c.layout] || c.layout) : null,
        el("span", {}, "session ", el("code", {}, c.session)),
        el("span", { class: "age", "data-queued": c.queued_ns / 1e6, "data-verb": SINCE[c.kind] || "queued" }, (SINCE[c.kind] || "queued") + " " + age(c.queued_ns / 1e6 + since) + " ago"),
        c.id ? el("span", {}, (IDLABEL[c.kind] || "id") + " ", el("code", { class: "cid" }, c.id)) : null,
        c.taken_by ? el("span", {}, "taken by ", el("code", { class: "taker" }, c.taken_by)) : null,
      );
      list.append(el("li", {
        class: c.state + (orphan ? " orphan" : ""),
        "data-node": c.node, "data-state": c.state, "data-kind": c.kind, "data-layout": c.layout || "", "data-waits-for": waitsFor ? waitsFor.node : "",
        "data-orphan": orphan ? "1" : "",
      },
      el("span", { class: "dot" }),
      el("div", { class: "box" },
        el("div", {}, el("span", { class: "state" }, c.state), "#" + c.position + " ", el("code", {}, c.node),
          orphan ? el("span", { class: "flag" }, "orphaned? session connected nowhere") : null,
          c.session === "persistent" && c.kind !== "item" ? el("span", { class: "flag" }, "not ephemeral: stays until deleted") : null),
        meta,
        waitsFor ? el("div", { class: "watches" }, "↑ watches #" + waitsFor.position + " ", el("code", {}, waitsFor.node)) : null,
      )));
    }
    out.push(el("div", { class: "line", "data-path": line.path },
      el("h3", {}, line.path, el("span", { class: "kind" }, line.summary)),
      el("div", { class: "note" }, (LINES.has(line.recipe) ? "line's pzxid " + line.pzxid + " (the holder's fencing token is at most this)" : "")
        + (line.other_children && line.other_children.length ? " · other children: " + line.other_children.join(", ") : "")),
      list));
  }
  $("recipes").replaceChildren(...out);
}

function tickAges() {
  if (state.view !== "recipes" || !recipes) return;
  const since = Date.now() - recipesAt;
  for (const s of document.querySelectorAll("#recipes .age")) {
    s.textContent = s.dataset.verb + " " + age(Number(s.dataset.queued) + since) + " ago";
  }
}

// ---------------------------------------------------------- the ensemble

function spark(values) {
  const w = 80, h = 18;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  if (values.length > 1) {
    const maxv = Math.max(...values, 1e-9);
    const pts = values.map((v, i) => `${(i / (values.length - 1)) * w},${h - 1 - (v / maxv) * (h - 2)}`);
    const pl = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    pl.setAttribute("points", pts.join(" "));
    svg.append(pl);
  }
  return svg;
}

async function loadHealth() {
  let h;
  try {
    h = await api("health");
  } catch (e) {
    say("ensemble: " + e.message);
    return;
  }
  const body = $("members").tBodies[0];
  const rows = [];
  for (const m of h.members) {
    if (m.error) {
      rows.push(el("tr", {}, el("td", { class: "mono" }, m.addr), el("td", { class: "err", colspan: 7 }, m.error)));
      continue;
    }
    const hist = state.history.get(m.addr) || [];
    hist.push({ lat: m.latency_avg_ms, out: m.outstanding, watches: m.watches });
    if (hist.length > 60) hist.shift();
    state.history.set(m.addr, hist);
    rows.push(el("tr", { "data-addr": m.addr },
      el("td", { class: "mono" }, m.addr), el("td", {}, m.mode),
      el("td", {}, `${m.latency_avg_ms} / ${m.latency_max_ms}`, spark(hist.map((x) => x.lat))),
      el("td", {}, m.outstanding, spark(hist.map((x) => x.out))),
      el("td", {}, m.znodes.toLocaleString()),
      el("td", {}, m.watches < 0 ? "?" : m.watches.toLocaleString(), spark(hist.map((x) => x.watches))),
      el("td", {}, m.connections), el("td", { class: "mono" }, m.zxid)));
  }
  body.replaceChildren(...rows);
  const sbody = $("sessions").tBodies[0];
  $("sessioncount").textContent = `(${h.sessions.length})`;
  sbody.replaceChildren(...h.sessions.map((s) => el("tr", {},
    el("td", { class: "mono" }, s.session), el("td", { class: "mono" }, s.server), el("td", { class: "mono" }, s.client),
    el("td", {}, s.timeout_ms), el("td", {}, s.last_op), el("td", {}, s.queued))));
}

// ---------------------------------------------------------- live

// setLive tells the state of the event stream (connecting, up, down, and
// why), then shows it with the console's link to ZooKeeper.
function setLive(s, why) {
  state.streamState = s;
  state.streamWhy = why || "";
  showLive();
}

// showLive shows, in the header, whether what the page shows is live:
// "live", "disconnected" (the console's ZooKeeper connection is down: what
// is shown may be stale), "expired" (its session ended: it is making a new
// one), or the event stream "connecting" or "down".
function showLive() {
  const e = $("live");
  const c = state.conn;
  let s = state.streamState, text = s, title = state.streamWhy || "the event stream";
  if (s === "up") {
    s = c ? c.state : "connected";
    if (s === "connected") { s = "live"; text = "live"; title = "the watch on " + state.root + (c ? ", session " + c.session : ""); }
    else if (s === "disconnected") { text = "ZooKeeper disconnected: the page may be stale"; title = c.error || ""; }
    else { s = "expired"; text = "session expired: reconnecting"; title = c.error || ""; }
  }
  e.dataset.state = s;
  e.dataset.session = c ? c.session : "";
  e.textContent = text;
  e.title = title;
}

// follow reads the subtree's changes (server-sent events, over fetch so
// that the token goes in a header) until the subtree changes.
async function follow(root) {
  if (state.stream) state.stream.abort();
  const ctrl = new AbortController();
  state.stream = ctrl;
  setLive("connecting");
  let pause = 250;
  while (!ctrl.signal.aborted) {
    try {
      const res = await fetch("/api/events?" + new URLSearchParams({ path: root }), { headers: headers(false), signal: ctrl.signal });
      if (!res.ok) {
        const b = await res.json().catch(() => ({}));
        throw new Error(b.error || res.statusText);
      }
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        pause = 250;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          onEvent(block);
        }
      }
      setLive("down", "the event stream ended");
    } catch (e) {
      if (ctrl.signal.aborted) return;
      setLive("down", e.message);
    }
    await new Promise((r) => setTimeout(r, pause / 2 + Math.random() * pause / 2));
    pause = Math.min(2 * pause, 5000);
  }
}

function onEvent(block) {
  let type = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) type = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (type === "ready") {
    setLive("up");
    refreshAll(); // what changed while the stream was down
  } else if (type === "conn") {
    const was = state.conn;
    state.conn = JSON.parse(data);
    showLive();
    // Back (the same session reconnected, or a new one): read what is
    // shown again, as the requests made meanwhile failed.
    if (state.conn.state === "connected" && was && (was.state !== "connected" || was.session !== state.conn.session)) refreshAll();
  } else if (type === "change") {
    for (const c of JSON.parse(data)) changed(c.path);
    schedule();
  } else if (type === "resync") {
    refreshAll();
  } else if (type === "end") {
    setLive("down", JSON.parse(data));
  }
}

function changed(path) {
  for (const p of [path, dirname(path), dirname(dirname(path))]) {
    if (state.nodes.has(p)) state.dirty.add(p);
  }
  if (path === state.selected) state.detailsDirty = true;
  state.recipesDirty = true;
}

let timer = null;
function schedule() {
  if (timer) return;
  timer = setTimeout(() => {
    timer = null;
    // While the console's ZooKeeper link is down, its reads fail: keep
    // what is to read again until the link is back (refreshAll then).
    if (state.conn && state.conn.state !== "connected") return;
    for (const p of state.dirty) {
      const n = state.nodes.get(p);
      if (n && n.expanded) reread(n);
    }
    state.dirty.clear();
    if (state.detailsDirty) { state.detailsDirty = false; showDetails(); }
    if (state.view === "recipes" && state.recipesDirty) loadRecipes();
    render();
  }, 100);
}

function refreshAll() {
  for (const n of state.nodes.values()) if (n.expanded) state.dirty.add(n.path);
  state.detailsDirty = true;
  state.recipesDirty = true;
  schedule();
}

// ---------------------------------------------------------- wiring

function show(root) {
  state.root = root;
  $("root").value = root;
  state.nodes.clear();
  state.top = new TNode(root, 0, { name: root, children: -1 });
  state.nodes.set(root, state.top);
  state.top.expanded = true;
  loadPage(state.top, 0);
  select(root);
  recipes = null;
  $("recipes").replaceChildren();
  state.recipesDirty = true;
  if (state.view === "recipes") loadRecipes();
  follow(root);
  const u = new URL(location.href);
  u.searchParams.set("path", root);
  u.searchParams.set("view", state.view);
  history.replaceState(null, "", u.pathname + u.search);
}

function setView(v) {
  state.view = v;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.view === v);
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + v;
  if (v === "recipes" && state.recipesDirty) loadRecipes();
  if (v === "health") loadHealth();
  if (v === "tree") render();
  const u = new URL(location.href);
  u.searchParams.set("view", v);
  history.replaceState(null, "", u.pathname + u.search);
}

async function start() {
  // The token comes in the address's #fragment (never sent to the
  // server); it is kept for the tab and taken out of the address bar.
  const m = /token=([0-9a-f]+)/.exec(location.hash);
  if (m) sessionStorage.setItem("zkr-token", m[1]);
  state.token = sessionStorage.getItem("zkr-token") || "";
  if (location.hash) history.replaceState(null, "", location.pathname + location.search);
  $("token").value = state.token;
  $("token").addEventListener("change", (e) => {
    state.token = e.target.value.trim();
    sessionStorage.setItem("zkr-token", state.token);
  });
  try {
    state.info = await api("info");
  } catch (e) {
    say("the console did not answer: " + e.message);
    $("tokenbox").hidden = false;
    return;
  }
  $("mode").textContent = (state.info.writes ? "writes allowed" : "read-only") + " · " + state.info.servers.join(",");
  $("tokenbox").hidden = !(state.info.writes || state.info.token_needed);

  $("rootform").addEventListener("submit", (e) => {
    e.preventDefault();
    const r = $("root").value.trim() || "/";
    if (!r.startsWith("/")) { say("a path starts with /"); return; }
    say("");
    show(r.length > 1 ? r.replace(/\/+$/, "") : r);
  });
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => setView(b.dataset.view));
  $("tree").addEventListener("scroll", render);
  window.addEventListener("resize", render);
  let ft = null;
  $("filter").addEventListener("input", () => {
    clearTimeout(ft);
    ft = setTimeout(() => {
      const n = state.nodes.get(state.selected);
      if (!n) return;
      n.filter = $("filter").value;
      n.expanded = true;
      n.total = null;
      reread(n);
    }, 200);
  });
  setInterval(tickAges, 1000);
  setInterval(() => { if (state.view === "health") loadHealth(); }, 2000);
  // A session cut off changes no node: read the recipes again now and then,
  // for orphans.
  // Not while the console's ZooKeeper link is down: its reads would fail.
  setInterval(() => {
    if (state.view === "recipes" && !document.hidden && (!state.conn || state.conn.state === "connected")) loadRecipes();
  }, 5000);

  const q = new URLSearchParams(location.search);
  const v = q.get("view");
  state.root = q.get("path") || "/"; // before the view reads its subtree
  if (v === "recipes" || v === "health") setView(v);
  show(state.root);
}

start();
