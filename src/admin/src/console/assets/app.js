// The garage web console: a client of the admin HTTP API (/v2/...).
// The admin token lives in this module's memory only.

let token = null;

// ---- DOM helpers: text nodes only, never parsed HTML ----

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// Shows `children` as the page, whichever page is current.
function render(...children) {
  const main = document.getElementById("view");
  main.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return main;
}

// Each route bumps this; a page shows itself only while it is the current
// route's (a slow page must not replace the one the user went to since).
let routeSeq = 0;

// The `view` of a page function: `render`, while the route that started
// the page is still the current one.
function guardedView() {
  const mine = routeSeq;
  return (...children) => (mine === routeSeq ? render(...children) : null);
}

function table(caption, head, rows) {
  return h("div", { class: "scroll" }, h("table", {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.length
      ? rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))
      : h("tr", {}, h("td", { colspan: head.length }, "none")))));
}

function field(label, input) {
  return h("label", { class: "field" }, h("span", {}, label), input);
}

function message(text, kind) {
  return h("p", { class: "msg " + (kind || ""), role: kind === "error" ? "alert" : "status" }, text);
}

function bytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return (i ? v.toFixed(1) : String(v)) + " " + units[i];
}

function parseSize(s) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)i?b?\s*$/i.exec(s);
  if (!m) throw new Error("capacity: give a size such as 500G or 2T");
  const mult = { "": 1, k: 1e3, m: 1e6, g: 1e9, t: 1e12, p: 1e15 }[m[2].toLowerCase()];
  return Math.round(Number(m[1]) * mult);
}

// ---- The admin API ----

// An error answer of the admin API, with its HTTP status.
class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

// A refusal because of the token's scope (the token itself is fine).
const outOfScope = (e) => e instanceof ApiError && e.status === 403 && /scope does not allow/.test(e.message);

async function api(method, endpoint, body) {
  const res = await fetch("/v2/" + endpoint, {
    method,
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!res.ok) {
    throw new ApiError((data && data.message) || res.status + " " + res.statusText, res.status);
  }
  return data;
}

const get = (e) => api("GET", e);
const post = (e, b) => api("POST", e, b === undefined ? {} : b);

// A request whose failure shows in its own section instead of failing the
// whole page (a scoped token may be refused some endpoints): {v} or {e}.
const soft = (p) => p.then((v) => ({ v }), (e) => ({ e }));
const refusal = (r) => message(outOfScope(r.e) ? "Not shown: " + r.e.message : r.e.message, "error");

// Runs `f` on submit, showing its error (or success text) in `out`.
function onSubmit(form, out, f) {
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    out.replaceChildren();
    try {
      const done = await f(new FormData(form));
      if (typeof done === "string") out.replaceChildren(message(done, "ok"));
    } catch (e) {
      out.replaceChildren(message(e.message, "error"));
    } finally {
      if (button) button.disabled = false;
    }
  });
}

// ---- Login ----

function login(reason) {
  token = null;
  routeSeq++;
  document.getElementById("top").hidden = true;
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true });
  const out = h("div", {});
  const form = h("form", { id: "login-form", class: "card narrow" },
    h("h1", {}, "garage console"),
    h("p", {}, "Log in with an admin token (admin_token or one made with garage admin-token create)."),
    field("Admin token", input),
    h("button", { type: "submit", id: "login" }, "Log in"),
    out);
  onSubmit(form, out, async (fd) => {
    token = String(fd.get("token"));
    try {
      await get("GetClusterStatus");
    } catch (e) {
      token = null;
      throw e;
    }
    input.value = "";
    document.getElementById("top").hidden = false;
    if (!location.hash || location.hash === "#/login") location.hash = "#/cluster";
    else route();
  });
  render(form);
  if (reason) out.replaceChildren(message(reason, "error"));
  input.focus();
}

// ---- Health, in one line at the top ----

async function health() {
  const el = document.getElementById("health");
  try {
    const x = await get("GetClusterHealth");
    el.className = "health " + x.status;
    el.textContent = `Cluster ${x.status}: ${x.connectedNodes}/${x.knownNodes} nodes connected, ` +
      `${x.storageNodesOk}/${x.storageNodes} storage nodes up, ` +
      `${x.partitionsAllOk}/${x.partitions} partitions with every copy, ${x.partitionsQuorum} with a quorum` +
      ((x.clockSkewedNodes || []).length
        ? `; clock off the cluster's: ${x.clockSkewedNodes.map((id) => id.slice(0, 16)).join(", ")}`
        : "");
  } catch (e) {
    el.className = "health unavailable";
    el.textContent = "Cluster health unavailable: " + e.message;
  }
  await upgradeBanner();
}

// While nodes run different releases (a rolling upgrade), a banner says
// so, with the active cluster version and what finalizing waits for.
async function upgradeBanner() {
  const el = document.getElementById("upgrade-banner");
  try {
    const v = (await get("GetClusterStatus")).clusterVersion;
    if (!v || !v.mixed) {
      el.hidden = true;
      return;
    }
    const blockers = v.finalizeBlockers || [];
    el.textContent = `Upgrade under way: nodes run ${v.lowest} to ${v.highest}; the cluster runs at version ` +
      `${v.active} until it is finalized (garage upgrade finalize)` +
      (blockers.length ? `; waiting for: ${blockers.join("; ")}` : "; every node is ready, rollback is still possible");
    el.hidden = false;
  } catch (e) {
    el.hidden = true;
  }
}

// ---- Cluster: nodes by zone, layout, workers ----

// A layout change in progress: how far each node is with it.
function transition(hist) {
  const cur = hist.currentVersion;
  const trackers = Object.entries(hist.updateTrackers || {});
  const behind = trackers.filter(([, t]) => t.sync < cur);
  const text = !trackers.length || !behind.length
    ? `No layout change in progress: every node has synced version ${cur}.`
    : `Change to version ${cur} in progress: ${trackers.length - behind.length} of ${trackers.length} nodes ` +
      `have synced it; data is still read from version ${hist.minAck} too.`;
  return h("section", { id: "transition" }, h("h2", {}, "Layout transition"),
    h("p", { role: "status" }, text),
    trackers.length ? table("Per node: the newest layout version acknowledged, synced, and seen synced by all",
      ["Node", "Acknowledged", "Synced", "All synced"],
      trackers.map(([id, t]) => [h("code", {}, id.slice(0, 16)), String(t.ack), String(t.sync), String(t.syncAck)])) : null);
}

// Per node: its resync queue and its blocks in error.
function blockHealth(workersByNode, errorsByNode) {
  const ids = Object.keys(workersByNode.success || {}).sort();
  return h("section", { id: "blocks" }, h("h2", {}, "Blocks"),
    table("Per node: blocks waiting for a resync, and blocks whose resync failed", ["Node", "Resync queue", "Blocks in error"],
      ids.map((id) => {
        const resync = (workersByNode.success[id] || []).find((w) => w.name.startsWith("Block resync"));
        const errs = (errorsByNode.success || {})[id];
        return [h("code", {}, id.slice(0, 16)), String(resync ? resync.queueLength ?? 0 : "?"),
          errs ? String(errs.length) : "?"];
      })));
}

// A node's clock offset from the cluster's, e.g. "+1.002 s", or "?".
function clockOffset(ms) {
  if (ms === undefined || ms === null) return "?";
  return `${ms >= 0 ? "+" : "-"}${(Math.abs(ms) / 1000).toFixed(3)} s`;
}

async function cluster() {
  const view = guardedView();
  const [status, layout, workersR, histR, allWorkersR, blockErrorsR, storageR] = await Promise.all([
    get("GetClusterStatus"),
    get("GetClusterLayout"),
    soft(post("ListWorkers?node=self", {})),
    soft(get("GetClusterLayoutHistory")),
    soft(post("ListWorkers?node=*", {})),
    soft(get("ListBlockErrors?node=*")),
    soft(get("GetNodeStorage?node=*")),
  ]);
  const stored = new Map(layout.roles.map((r) => [r.id, r.storedPartitions]));
  const zones = new Map();
  for (const n of status.nodes) {
    const z = n.role ? n.role.zone : "(no role)";
    if (!zones.has(z)) zones.set(z, []);
    zones.get(z).push(n);
  }
  const zoneSections = [...zones.keys()].sort().map((z) =>
    h("section", { class: "zone", "data-zone": z },
      h("h3", {}, "Zone " + z, h("span", { class: "zone-sum" },
        ` — ${zones.get(z).length} node${zones.get(z).length === 1 ? "" : "s"}, ` +
        `${zones.get(z).reduce((a, n) => a + (stored.get(n.id) || 0), 0)} partition copies`)),
      table(`Nodes of zone ${z}`, ["Node", "Host", "State", "Capacity", "Data free", "Partitions", "Clock", "Version"],
        zones.get(z).map((n) => [
          h("code", { title: n.id }, n.id.slice(0, 16)),
          n.hostname || "",
          h("span", { class: n.isUp ? "up" : "down" }, n.isUp ? "up" : `down (${n.lastSeenSecsAgo ?? "?"} s)`),
          n.role ? (n.role.capacity === null ? "gateway" : bytes(n.role.capacity)) : "",
          n.dataPartition ? `${bytes(n.dataPartition.available)} of ${bytes(n.dataPartition.total)}` : "",
          String(stored.get(n.id) ?? ""),
          clockOffset(n.clockOffsetMs),
          n.garageVersion || "?",
        ]))));

  const out = h("div", {});
  const nodeSelect = h("select", { name: "id", id: "stage-node", required: true },
    status.nodes.map((n) => h("option", { value: n.id }, `${n.id.slice(0, 16)} ${n.hostname || ""}`)));
  const stageForm = h("form", { id: "stage-form", class: "inline" },
    field("Node", nodeSelect),
    field("Zone", h("input", { name: "zone", id: "stage-zone", required: true })),
    field("Capacity", h("input", { name: "capacity", id: "stage-capacity", required: true, placeholder: "1G" })),
    h("button", { type: "submit", id: "stage" }, "Stage"));
  onSubmit(stageForm, out, async (fd) => {
    await post("UpdateClusterLayout", {
      roles: [{ id: fd.get("id"), zone: fd.get("zone"), capacity: parseSize(String(fd.get("capacity"))), tags: [] }],
    });
    await cluster();
  });

  const staged = layout.stagedRoleChanges || [];
  // Storage classes: where each keeps its blocks, and what it survives;
  // what the nodes store of each (their last census, summed), and what
  // waits to be handed over while the class moves.
  const perClass = new Map();
  for (const st of Object.values((storageR.v && storageR.v.success) || {})) {
    for (const c of st.classes || []) {
      const t = perClass.get(c.class) || { bytes: 0, moving: 0, movingBytes: 0 };
      t.bytes += c.bytes;
      t.moving += c.toHandOverFiles;
      t.movingBytes += c.toHandOverBytes;
      perClass.set(c.class, t);
    }
  }
  const classes = table("Storage classes", ["Class", "Redundancy", "Bytes per byte", "Zones", "Survives", "Stored", "Moving"],
    (layout.storageClasses || []).map((c) => {
      const t = perClass.get(c.name);
      return [
        c.name,
        c.kind === "replicated" ? `replication ${c.redundancy}` : `erasure ${c.redundancy}`,
        `${c.overhead.toFixed(2)}x`,
        (c.zones || []).length ? c.zones.join(", ") : "all",
        c.survives || "",
        t ? bytes(t.bytes) : "?",
        t ? (t.moving ? `${t.moving} files (${bytes(t.movingBytes)}) to hand over` : "-") : "?",
      ];
    }));
  const now = (layout.parameters && layout.parameters.classDefinitions) || {};
  const next = (layout.stagedParameters && layout.stagedParameters.classDefinitions) || null;
  const classChanges = next ? [...new Set([...Object.keys(now), ...Object.keys(next)])].sort()
    .filter((n) => JSON.stringify(now[n]) !== JSON.stringify(next[n]))
    .map((n) => [n, next[n]
      ? `${next[n].replication ? "replication " + next[n].replication : "erasure " + next[n].erasure} in ${(next[n].zones || []).length ? "zones " + next[n].zones.join(", ") : "every zone"}`
      : "removed"]) : [];
  const preview = h("div", { id: "preview" });
  const actions = staged.length || layout.stagedParameters ? h("div", { class: "actions" },
    h("button", { type: "button", id: "preview-button", onclick: async () => {
      try {
        const p = await post("PreviewClusterLayoutChanges");
        preview.replaceChildren(
          h("h3", {}, `Layout version ${p.newLayout.version} would be:`),
          h("pre", {}, p.message.join("\n")),
          table("Roles after the change", ["Node", "Zone", "Capacity", "Partitions"],
            p.newLayout.roles.map((r) => [r.id.slice(0, 16), r.zone, bytes(r.capacity), String(r.storedPartitions ?? "")])));
      } catch (e) { preview.replaceChildren(message(e.message, "error")); }
    } }, "Preview"),
    h("button", { type: "button", id: "apply", onclick: async () => {
      try {
        await post("ApplyClusterLayout", { version: layout.version + 1 });
        await cluster();
        document.getElementById("layout-msg").replaceChildren(message(`Layout version ${layout.version + 1} applied.`, "ok"));
      } catch (e) { preview.replaceChildren(message(e.message, "error")); }
    } }, "Apply"),
    h("button", { type: "button", id: "revert", class: "secondary", onclick: async () => {
      try { await post("RevertClusterLayout"); await cluster(); } catch (e) { preview.replaceChildren(message(e.message, "error")); }
    } }, "Revert")) : null;

  view(
    h("h1", {}, "Cluster"),
    h("section", {}, h("h2", {}, "Nodes by zone"), zoneSections),
    h("section", { id: "layout" },
      h("h2", {}, `Layout (version ${layout.version})`),
      h("div", { id: "layout-msg" }),
      table("Staged role changes", ["Node", "Change"], staged.map((c) => [
        c.id.slice(0, 16),
        c.remove ? "remove" : `zone ${c.zone}, capacity ${c.capacity === null ? "gateway" : bytes(c.capacity)}`,
      ])),
      classes,
      classChanges.length ? table("Staged storage class changes", ["Class", "Change"], classChanges) : null,
      actions, preview, stageForm, out),
    histR.e ? h("section", { id: "transition" }, h("h2", {}, "Layout transition"), refusal(histR)) : transition(histR.v),
    allWorkersR.e || blockErrorsR.e
      ? h("section", { id: "blocks" }, h("h2", {}, "Blocks"), refusal(allWorkersR.e ? allWorkersR : blockErrorsR))
      : blockHealth(allWorkersR.v, blockErrorsR.v),
    h("section", { id: "workers" },
      h("h2", {}, "Workers of this node"),
      workersR.e ? refusal(workersR) : table("Background workers", ["Worker", "State", "Queue", "Errors"],
        Object.values(workersR.v.success || {})[0]?.map((w) => [
          w.name, w.state, w.queueLength ?? "", w.errors ? `${w.errors} (${w.consecutiveErrors} in a row)` : "",
        ]) || [])),
  );
}

// ---- Activity: charts from each node's own counters, RTT between nodes ----

// Per-second rates between consecutive cumulative samples.
function rates(samples, field) {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = (samples[i].time - samples[i - 1].time) / 1000;
    const dv = samples[i][field] - samples[i - 1][field];
    out.push({ t: samples[i].time, v: dt > 0 && dv >= 0 ? dv / dt : 0 });
  }
  return out;
}

const COLORS = ["#1f5fbf", "#b3261e"];

// A line chart of `series` ([{label, points: [{t, v}]}]) over the last hour.
function chart(id, title, series, unit) {
  const canvas = h("canvas", { id, width: 560, height: 180, role: "img" });
  const now = Date.now();
  const max = Math.max(1e-9, ...series.flatMap((s) => s.points.map((p) => p.v)));
  const ctx = canvas.getContext("2d");
  if (ctx) {
    const W = canvas.width, H = canvas.height, L = 56, B = 22;
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    ctx.strokeStyle = "#d8dde5";
    ctx.fillStyle = "#5b6575";
    ctx.font = "11px sans-serif";
    for (let i = 0; i <= 4; i++) {
      const y = 8 + ((H - B - 8) * i) / 4;
      ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(W - 4, y); ctx.stroke();
      ctx.fillText(unit((max * (4 - i)) / 4), 2, y + 4);
    }
    ctx.fillText("-60 min", L, H - 6);
    ctx.fillText("now", W - 28, H - 6);
    series.forEach((s, k) => {
      ctx.strokeStyle = COLORS[k % COLORS.length];
      ctx.lineWidth = 2;
      ctx.beginPath();
      s.points.forEach((p, i) => {
        const x = L + ((W - 4 - L) * (3600e3 - (now - p.t))) / 3600e3;
        const y = 8 + (H - B - 8) * (1 - p.v / max);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      ctx.stroke();
    });
  }
  const summary = series.map((s) => {
    const last = s.points.length ? s.points[s.points.length - 1].v : 0;
    const peak = Math.max(0, ...s.points.map((p) => p.v));
    return `${s.label}: now ${unit(last)}, peak ${unit(peak)}`;
  }).join("; ");
  canvas.setAttribute("aria-label", `${title}. ${summary}`);
  return h("figure", { class: "chart" }, canvas,
    h("figcaption", {}, title, h("br", {}),
      series.map((s, k) => h("span", { class: "legend", "data-color": k }, s.label)), " — ", summary));
}

const perSec = (v) => (v >= 100 ? v.toFixed(0) : v.toFixed(2)) + "/s";
const bytesPerSec = (v) => bytes(Math.round(v)) + "/s";

async function activity() {
  const view = guardedView();
  const [status, infos, history] = await Promise.all([
    get("GetClusterStatus"), get("GetNodeInfo?node=*"), get("GetNodeMetricsHistory?node=*"),
  ]);
  const nodes = status.nodes;
  const label = (id) => {
    const n = nodes.find((x) => x.id === id);
    return `${id.slice(0, 8)} ${n && n.role ? n.role.zone : ""}`;
  };
  const rtt = table("Round-trip time of each node's last ping to the others (ms); rows ping columns",
    ["From \\ to", ...nodes.map((n) => label(n.id))],
    nodes.map((a) => [label(a.id), ...nodes.map((b) => {
      if (a.id === b.id) return "—";
      const v = ((infos.success || {})[a.id] || {}).peerRttMs || {};
      return v[b.id] === undefined ? "?" : v[b.id].toFixed(1);
    })]));
  const charts = Object.entries(history.success || {}).sort().map(([id, hst]) =>
    h("section", { class: "node-charts", "data-node": id },
      h("h3", {}, "Node " + label(id)),
      hst.samples.length < 2
        ? message("Not enough samples yet: one is taken every " + hst.intervalSecs + " s.")
        : h("div", { class: "charts" },
          chart("req-" + id.slice(0, 8), "Requests and errors", [
            { label: "requests", points: rates(hst.samples, "requests") },
            { label: "errors", points: rates(hst.samples, "errors") }], perSec),
          chart("traffic-" + id.slice(0, 8), "S3 and website bytes in and out", [
            { label: "in", points: rates(hst.samples, "bytesIn") },
            { label: "out", points: rates(hst.samples, "bytesOut") }], bytesPerSec),
          chart("bytes-" + id.slice(0, 8), "Block bytes written and read", [
            { label: "written", points: rates(hst.samples, "bytesWritten") },
            { label: "read", points: rates(hst.samples, "bytesRead") }], bytesPerSec))));
  const errors = Object.entries(history.error || {}).map(([id, e]) => message(`Node ${id.slice(0, 8)}: ${e}`, "error"));
  view(h("h1", {}, "Activity"),
    h("h2", {}, "Round-trip times"), rtt,
    h("h2", {}, "The last hour, per node"), errors, charts);
  // New samples come every 10 s: the page follows while it is shown.
  clearTimeout(activityTimer);
  activityTimer = setTimeout(() => { if (location.hash === "#/activity") route(); }, 10000);
}

let activityTimer = null;

// ---- Buckets ----

const BUCKETS_PER_PAGE = 50;

async function buckets(page) {
  const view = guardedView();
  const list = await get("ListBuckets");
  const n = Math.max(0, Number(page || 0));
  const shown = list.slice(n * BUCKETS_PER_PAGE, (n + 1) * BUCKETS_PER_PAGE);
  const out = h("div", {});
  const form = h("form", { id: "create-bucket", class: "inline" },
    field("Name", h("input", { name: "name", id: "bucket-name", required: true })),
    h("button", { type: "submit" }, "Create bucket"));
  onSubmit(form, out, async (fd) => {
    const b = await post("CreateBucket", { globalAlias: fd.get("name") });
    location.hash = "#/bucket/" + b.id;
  });
  // Object counts and sizes come from each bucket's counters, read for the
  // buckets of this page only, a few at a time.
  const cells = new Map(shown.map((b) => [b.id, [h("td", { "data-objects": b.id }, "…"), h("td", { "data-bytes": b.id }, "…")]]));
  const rows = shown.map((b) => h("tr", {},
    h("td", {}, h("a", { href: "#/bucket/" + b.id, class: "bucket-link" },
      b.globalAliases[0] || (b.localAliases[0] && b.localAliases[0].alias) || b.id.slice(0, 16))),
    cells.get(b.id),
    h("td", {}, b.created.replace("T", " ").slice(0, 19)),
    h("td", {}, h("code", {}, b.id.slice(0, 16)))));
  const pages = Math.ceil(list.length / BUCKETS_PER_PAGE);
  view(
    h("h1", {}, "Buckets"),
    form, out,
    h("div", { class: "scroll" }, h("table", { id: "bucket-list" },
      h("caption", {}, pages > 1 ? `Buckets (page ${n + 1} of ${pages}, ${list.length} in all)` : "Buckets"),
      h("thead", {}, h("tr", {}, ["Name", "Objects", "Size", "Created", "Id"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 5 }, "none"))))),
    pages > 1 ? h("nav", { class: "actions", "aria-label": "Bucket pages" },
      n > 0 ? h("a", { href: `#/buckets/${n - 1}` }, "Previous page") : null,
      n + 1 < pages ? h("a", { href: `#/buckets/${n + 1}`, id: "next-buckets" }, "Next page") : null) : null,
  );
  const queue = [...shown];
  const worker = async () => {
    for (let b = queue.shift(); b; b = queue.shift()) {
      const [objs, size] = cells.get(b.id);
      if (!objs.isConnected) return; // the page was left
      try {
        const i = await get("GetBucketInfo?id=" + encodeURIComponent(b.id));
        objs.textContent = String(i.objects);
        size.textContent = bytes(i.bytes);
      } catch (e) {
        objs.textContent = "?";
        size.textContent = "?";
        objs.title = size.title = e.message;
      }
    }
  };
  await Promise.all([1, 2, 3, 4].map(worker));
}

async function bucket(id) {
  const view = guardedView();
  const [b, keysR] = await Promise.all([get("GetBucketInfo?id=" + encodeURIComponent(id)), soft(get("ListKeys"))]);
  const name = b.globalAliases[0] || b.id.slice(0, 16);
  const out = h("div", {});
  const allow = keysR.e ? refusal(keysR) : h("form", { id: "allow-key", class: "inline" },
    field("Key", h("select", { name: "key", required: true },
      keysR.v.map((k) => h("option", { value: k.id }, `${k.name} (${k.id})`)))),
    ["read", "write", "owner"].map((p) =>
      h("label", { class: "check" }, h("input", { type: "checkbox", name: p, checked: p !== "owner" }), p)),
    h("button", { type: "submit" }, "Allow"));
  if (!keysR.e) onSubmit(allow, out, async (fd) => {
    await post("AllowBucketKey", {
      bucketId: b.id, accessKeyId: fd.get("key"),
      permissions: { read: fd.has("read"), write: fd.has("write"), owner: fd.has("owner") },
    });
    await bucket(id);
  });
  // Runs an API change from this page, then shows the page again.
  const change = async (f) => {
    try { await f(); await bucket(id); } catch (e) { out.replaceChildren(message(e.message, "error")); }
  };
  const aliasForm = h("form", { id: "add-alias", class: "inline" },
    field("New global name", h("input", { name: "alias", id: "alias-name", required: true })),
    h("button", { type: "submit" }, "Add name"));
  onSubmit(aliasForm, out, async (fd) => {
    await post("AddBucketAlias", { bucketId: b.id, globalAlias: fd.get("alias") });
    await bucket(id);
  });
  const aliases = h("ul", { class: "aliases" }, b.globalAliases.map((a) => h("li", {}, a, " ",
    h("button", { type: "button", class: "small secondary", "data-alias": a, "aria-label": "Remove name " + a,
      onclick: () => change(() => post("RemoveBucketAlias", { bucketId: b.id, globalAlias: a })) }, "Remove"))));
  const sizeText = (v) => (v === null || v === undefined ? "" : String(v));
  const quotaForm = h("form", { id: "quotas", class: "inline" },
    field("Max size in bytes, or with a unit such as 10G (empty: none)", h("input", { name: "maxSize", id: "quota-size", value: sizeText(b.quotas.maxSize) })),
    field("Max objects (empty: none)", h("input", { name: "maxObjects", id: "quota-objects", inputmode: "numeric", value: sizeText(b.quotas.maxObjects) })),
    h("button", { type: "submit" }, "Set quotas"));
  onSubmit(quotaForm, out, async (fd) => {
    const size = String(fd.get("maxSize")).trim();
    const objs = String(fd.get("maxObjects")).trim();
    if (objs && !/^\d+$/.test(objs)) throw new Error("max objects: give a whole number, or nothing");
    await post("UpdateBucket?id=" + encodeURIComponent(b.id), {
      quotas: { maxSize: size ? parseSize(size) : null, maxObjects: objs ? Number(objs) : null },
    });
    await bucket(id);
  });
  const website = h("button", { type: "button", id: "website", onclick: async () => {
    try {
      await post("UpdateBucket?id=" + encodeURIComponent(b.id), { websiteAccess: { enabled: !b.websiteAccess } });
      await bucket(id);
    } catch (e) { out.replaceChildren(message(e.message, "error")); }
  } }, b.websiteAccess ? "Stop serving as a website" : "Serve as a website");
  const del = h("button", { type: "button", id: "delete-bucket", class: "danger", onclick: async () => {
    if (!confirm(`Delete bucket ${name}? It must be empty.`)) return;
    try {
      await post("DeleteBucket?id=" + encodeURIComponent(b.id));
      location.hash = "#/buckets";
    } catch (e) { out.replaceChildren(message(e.message, "error")); }
  } }, "Delete bucket");
  const limit = (v, f) => (v === null || v === undefined ? "none" : f(v));
  view(
    h("h1", {}, "Bucket " + name),
    h("p", {}, h("a", { href: "#/objects/" + b.id, id: "browse" }, "Browse objects")),
    h("dl", { class: "facts" },
      [["Id", b.id], ["Created", b.created], ["Aliases", b.globalAliases.join(", ")],
        ["Objects", String(b.objects)], ["Size", bytes(b.bytes)],
        ["Size by storage class", Object.entries(b.bytesByClass || {}).map(([c, n]) =>
          c + " " + bytes(n) + ((b.diskBytesByClass || {})[c] !== undefined ? ` (${bytes(b.diskBytesByClass[c])} on disk)` : "")).join(", ")],
        ["Default storage class", b.defaultStorageClass || "STANDARD"],
        ["Unfinished uploads", String(b.unfinishedUploads)],
        ["Website", b.websiteAccess ? "served" : "not served"], ["Quota: size", limit(b.quotas.maxSize, bytes)],
        ["Quota: objects", limit(b.quotas.maxObjects, String)]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v)])),
    h("h2", {}, "Names"), aliases, aliasForm,
    h("h2", {}, "Quotas"), quotaForm,
    h("h2", {}, "Keys"),
    table("Keys allowed on this bucket", ["Key", "Name", "Read", "Write", "Owner", ""], b.keys.map((k) => [
      h("a", { href: "#/key/" + k.accessKeyId }, h("code", {}, k.accessKeyId)), k.name,
      k.permissions.read ? "yes" : "", k.permissions.write ? "yes" : "", k.permissions.owner ? "yes" : "",
      h("button", { type: "button", class: "small danger", "data-revoke": k.accessKeyId, "aria-label": "Revoke key " + k.name,
        onclick: () => change(() => post("DenyBucketKey", {
          bucketId: b.id, accessKeyId: k.accessKeyId, permissions: { read: true, write: true, owner: true },
        })) }, "Revoke"),
    ])),
    allow,
    s3Settings(b, () => bucket(id)),
    replicationRules(b),
    h("div", { class: "actions" }, website, del),
    out,
  );
}

// A bucket's replication rules (set with PutBucketReplication), if it has any.
function replicationRules(b) {
  const rules = b.replicationRules || [];
  if (!rules.length) return null;
  return h("section", { id: "replication" }, h("h2", {}, "Replication"),
    table("Replication rules: where this bucket's new versions are copied (set with an S3 client's PutBucketReplication)",
      ["Rule", "Priority", "Status", "Prefix", "Tags", "Destination", "Delete markers"],
      rules.map((r) => [r.id, String(r.priority), r.enabled ? "enabled" : "disabled", r.prefix || "(every key)",
        (r.tags || []).join(", "), destination(r.destination), r.deleteMarkers ? "replicated" : "not replicated"])));
}

// ---- A bucket's S3 settings: versioning, object lock, CORS, lifecycle ----
// Shown from GetBucketInfo; changed through S3 requests presigned with a
// key that owns the bucket, so S3 checks them as it checks any client's.

// A copy of an XML element tree without namespaces (for a new document).
function plainXml(doc, el) {
  const c = doc.createElement(el.localName);
  for (const n of el.childNodes) {
    if (n.nodeType === Node.ELEMENT_NODE) c.append(plainXml(doc, n));
    else if (n.nodeType === Node.TEXT_NODE && n.textContent.trim()) c.append(doc.createTextNode(n.textContent));
  }
  return c;
}

// An element `name` with children: [name, text] or [name, [...]] pairs.
function xmlEl(doc, name, children) {
  const el = doc.createElement(name);
  if (typeof children === "string") el.textContent = children;
  else for (const [n, c] of children) if (c !== null && c !== undefined) el.append(xmlEl(doc, n, c));
  return el;
}

// Reads the bucket's `sub` configuration (cors, lifecycle) from S3, lets
// `change` edit its list of `rule` elements, and writes it back (or
// deletes it when no rule is left).
async function editRules(o, sub, rootName, ruleName, change) {
  const doc = document.implementation.createDocument(null, rootName, null);
  let rules = [];
  try {
    const { xml } = await s3(o, "GET", null, { [sub]: "" });
    rules = tag(xml.documentElement, ruleName).map((r) => plainXml(doc, r));
  } catch (e) {
    if (e.status !== 404) throw e;
  }
  rules = change(rules, doc);
  if (!rules.length) {
    await s3(o, "DELETE", null, { [sub]: "" });
    return;
  }
  doc.documentElement.append(...rules);
  await s3(o, "PUT", null, { [sub]: "" }, new XMLSerializer().serializeToString(doc));
}

const words = (v) => String(v || "").split(/[\s,]+/).filter(Boolean);

// The rules without the one at `i`, if it is still the one the page shows
// (`same` compares): a rule list changed meanwhile is not edited blindly.
function without(rules, i, same) {
  if (!rules[i] || !same(rules[i])) {
    throw new Error("the rules changed since this page was shown: reload it (click Buckets, then the bucket) and try again");
  }
  return rules.filter((_, j) => j !== i);
}
const texts = (el, name) => tag(el, name).map((e) => e.textContent).sort().join(" ");
const sameCors = (r) => (el) => texts(el, "AllowedOrigin") === [...r.allowedOrigins].sort().join(" ") &&
  texts(el, "AllowedMethod") === [...r.allowedMethods].sort().join(" ");
const sameLifecycle = (r) => (el) => text1(el, "ID") === (r.id || "");

function s3Settings(b, reload) {
  const out = h("div", { id: "s3-settings-msg" });
  const owners = b.keys.filter((k) => k.permissions.owner);
  const name = b.globalAliases[0];
  const o = { name, key: owners.length ? owners[0].accessKeyId : null };
  const facts = h("dl", { class: "facts" },
    h("dt", {}, "Versioning"), h("dd", { id: "versioning-state" }, b.versioning),
    h("dt", {}, "Object lock"), h("dd", { id: "lock-state" }, b.objectLock));
  const corsTable = table("CORS rules: which web origins may call S3 on this bucket from a browser",
    ["Origins", "Methods", "Headers", "Exposed headers", "Max age", ""],
    b.corsRules.map((r, i) => [r.allowedOrigins.join(" "), r.allowedMethods.join(" "), r.allowedHeaders.join(" "),
      r.exposeHeaders.join(" "), r.maxAgeSeconds === null ? "" : r.maxAgeSeconds + " s",
      o.key ? h("button", { type: "button", class: "small danger", "data-cors-remove": i, "aria-label": "Remove CORS rule " + (i + 1),
        onclick: () => act(() => editRules(o, "cors", "CORSConfiguration", "CORSRule", (rs) => without(rs, i, sameCors(r))),
          "CORS rule removed.") }, "Remove") : ""]));
  const lifeTable = table("Lifecycle rules: what expires, and when",
    ["Rule", "Status", "Applies to", "Actions", ""],
    b.lifecycleRules.map((r, i) => [r.id || "", r.enabled ? "enabled" : "disabled", r.filter, r.actions.join("; "),
      o.key ? h("button", { type: "button", class: "small danger", "data-lifecycle-remove": i, "aria-label": "Remove lifecycle rule " + (r.id || i + 1),
        onclick: () => act(() => editRules(o, "lifecycle", "LifecycleConfiguration", "Rule", (rs) => without(rs, i, sameLifecycle(r))),
          "Lifecycle rule removed.") }, "Remove") : ""]));
  const section = h("section", { id: "s3-settings" }, h("h2", {}, "S3 settings"), facts);
  if (!name || !o.key) {
    section.append(message(name
      ? "To change these here, allow a key with the owner permission on this bucket: S3 lets only an owner change them."
      : "S3 settings are changed through a global name: add one first."),
    h("h3", {}, "CORS"), corsTable, h("h3", {}, "Lifecycle"), lifeTable);
    return section;
  }
  // Runs an S3 change, then shows the page again with `done` said.
  async function act(f, done) {
    try {
      await f();
      await reload();
      const msg = document.getElementById("s3-settings-msg");
      if (msg) msg.replaceChildren(message(done, "ok"));
    } catch (e) { out.replaceChildren(message(e.message, "error")); }
  }
  const keySelect = h("select", { id: "settings-key", onchange: () => { o.key = keySelect.value; } },
    owners.map((k) => h("option", { value: k.accessKeyId }, `${k.name} (${k.accessKeyId})`)));
  const enable = b.versioning !== "enabled";
  const versioning = h("button", { type: "button", id: "versioning-toggle", onclick: () => act(() => {
    const doc = document.implementation.createDocument(null, "VersioningConfiguration", null);
    doc.documentElement.append(xmlEl(doc, "Status", enable ? "Enabled" : "Suspended"));
    return s3(o, "PUT", null, { versioning: "" }, new XMLSerializer().serializeToString(doc));
  }, enable ? "Versioning enabled." : "Versioning suspended.") }, enable ? "Enable versioning" : "Suspend versioning");

  const corsForm = h("form", { id: "cors-form", class: "inline" },
    field("Allowed origins (space-separated; * for any)", h("input", { name: "origins", id: "cors-origins", required: true })),
    h("fieldset", { class: "methods" }, h("legend", {}, "Methods"),
      ["GET", "HEAD", "PUT", "POST", "DELETE"].map((m) =>
        h("label", { class: "check" }, h("input", { type: "checkbox", name: "method", value: m, checked: m === "GET" || m === "HEAD" }), m))),
    field("Allowed headers (optional)", h("input", { name: "headers", id: "cors-headers" })),
    field("Exposed headers (optional)", h("input", { name: "expose", id: "cors-expose" })),
    field("Max age in seconds (optional)", h("input", { name: "maxAge", id: "cors-max-age", inputmode: "numeric" })),
    h("button", { type: "submit" }, "Add CORS rule"));
  onSubmit(corsForm, out, async (fd) => {
    const methods = fd.getAll("method").map(String);
    if (!methods.length) throw new Error("CORS rule: choose at least one method");
    const maxAge = String(fd.get("maxAge")).trim();
    if (maxAge && !/^\d+$/.test(maxAge)) throw new Error("max age: give a whole number of seconds, or nothing");
    await act(() => editRules(o, "cors", "CORSConfiguration", "CORSRule", (rs, doc) => [...rs, xmlEl(doc, "CORSRule", [
      ...words(fd.get("headers")).map((x) => ["AllowedHeader", x]),
      ...methods.map((x) => ["AllowedMethod", x]),
      ...words(fd.get("origins")).map((x) => ["AllowedOrigin", x]),
      ...words(fd.get("expose")).map((x) => ["ExposeHeader", x]),
      ["MaxAgeSeconds", maxAge || null],
    ])]), "CORS rule added.");
  });

  const lifeForm = h("form", { id: "lifecycle-form", class: "inline" },
    field("Rule id (optional)", h("input", { name: "id", id: "lifecycle-id" })),
    field("Key prefix (empty: every object)", h("input", { name: "prefix", id: "lifecycle-prefix" })),
    field("Expire objects after (days)", h("input", { name: "days", id: "lifecycle-days", inputmode: "numeric" })),
    field("Abort unfinished uploads after (days)", h("input", { name: "abort", id: "lifecycle-abort", inputmode: "numeric" })),
    h("button", { type: "submit" }, "Add lifecycle rule"));
  onSubmit(lifeForm, out, async (fd) => {
    const num = (n, what) => {
      const v = String(fd.get(n)).trim();
      if (v && !/^[1-9]\d*$/.test(v)) throw new Error(what + ": give a whole number of days (1 or more), or nothing");
      return v || null;
    };
    const days = num("days", "expire after");
    const abort = num("abort", "abort uploads after");
    if (!days && !abort) throw new Error("lifecycle rule: give the days after which objects expire, or uploads are aborted, or both");
    const id = String(fd.get("id")).trim();
    await act(() => editRules(o, "lifecycle", "LifecycleConfiguration", "Rule", (rs, doc) => [...rs, xmlEl(doc, "Rule", [
      ["ID", id || null],
      ["Filter", [["Prefix", String(fd.get("prefix"))]]],
      ["Status", "Enabled"],
      ["Expiration", days ? [["Days", days]] : null],
      ["AbortIncompleteMultipartUpload", abort ? [["DaysAfterInitiation", abort]] : null],
    ])]), "Lifecycle rule added.");
  });

  section.append(
    h("div", { class: "inline" }, field("Act as owner key", keySelect)),
    h("div", { class: "actions" }, versioning),
    h("h3", {}, "CORS"), corsTable, corsForm,
    h("h3", {}, "Lifecycle"), lifeTable, lifeForm,
    out);
  return section;
}

// ---- Objects: browse, upload, download, delete (S3 through presigned requests) ----

// Presigns an S3 request with `key` and returns its path on this origin's
// relay (/ui/s3/...).
async function presigned(o, method, objectKey, query) {
  const r = await post("PresignS3Request", {
    accessKeyId: o.key, method, bucket: o.name, key: objectKey || null, query: query || {}, expiresSecs: 900,
  });
  return "/ui/s3" + r.pathAndQuery;
}

async function s3(o, method, objectKey, query, body) {
  const res = await fetch(await presigned(o, method, objectKey, query), { method, body, credentials: "omit" });
  const text = await res.text();
  const xml = text ? new DOMParser().parseFromString(text, "application/xml") : null;
  if (!res.ok) {
    const m = xml && xml.querySelector("Message");
    const e = new Error(`S3 ${method}: ${res.status} ${m ? m.textContent : res.statusText}`);
    e.status = res.status;
    throw e;
  }
  return { xml, headers: res.headers };
}

const tag = (el, name) => [...el.children].filter((c) => c.localName === name);
const text1 = (el, name) => (tag(el, name)[0] || {}).textContent || "";

// One PUT with upload progress (XMLHttpRequest: fetch has none).
function putWithProgress(url, blob, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open("PUT", url);
    x.upload.addEventListener("progress", (e) => onProgress(e.loaded));
    x.addEventListener("load", () => (x.status < 300 ? resolve(x.getResponseHeader("ETag"))
      : reject(new Error(`S3 PUT: ${x.status} ${x.statusText}`))));
    x.addEventListener("error", () => reject(new Error("S3 PUT: the connection failed")));
    x.send(blob);
  });
}

const PART = 8 * 1024 * 1024;

// Uploads `file` as `objectKey`: one PUT, or a multipart upload of 8 MiB
// parts above 16 MiB; `progress` gets the bytes sent so far.
async function upload(o, objectKey, file, progress) {
  if (file.size <= 2 * PART) {
    await putWithProgress(await presigned(o, "PUT", objectKey), file, progress);
    return;
  }
  const created = await s3(o, "POST", objectKey, { uploads: "" });
  const uploadId = created.xml.querySelector("UploadId").textContent;
  try {
    const etags = [];
    for (let i = 0, n = 1; i < file.size; i += PART, n++) {
      const url = await presigned(o, "PUT", objectKey, { partNumber: String(n), uploadId });
      etags.push(await putWithProgress(url, file.slice(i, i + PART), (l) => progress(i + l)));
    }
    const body = "<CompleteMultipartUpload>" + etags.map((e, i) =>
      `<Part><PartNumber>${i + 1}</PartNumber><ETag>${e.replace(/[<>&]/g, "")}</ETag></Part>`).join("") +
      "</CompleteMultipartUpload>";
    await s3(o, "POST", objectKey, { uploadId }, body);
  } catch (e) {
    await s3(o, "DELETE", objectKey, { uploadId }).catch(() => null);
    throw e;
  }
}

async function objects(id) {
  const view = guardedView();
  const b = await get("GetBucketInfo?id=" + encodeURIComponent(id));
  const name = b.globalAliases[0];
  // Keys that may read; those that may also write (upload, delete) first.
  const readers = b.keys.filter((k) => k.permissions.read)
    .sort((x, y) => Number(y.permissions.write) - Number(x.permissions.write));
  if (!name || !readers.length) {
    view(h("h1", {}, "Objects"), message(name
      ? "No key may read this bucket: allow one on the bucket's page first."
      : "The object browser needs a bucket with a global name.", "error"),
    h("a", { href: "#/bucket/" + id }, "Back to the bucket"));
    return;
  }
  const o = { name, key: readers[0].accessKeyId, prefix: "", pages: [null] };
  const list = h("div", { id: "object-list" });
  const out = h("div", {});
  const keySelect = h("select", { id: "object-key", onchange: () => { o.key = keySelect.value; show(); } },
    readers.map((k) => h("option", { value: k.accessKeyId }, `${k.name} (${k.accessKeyId})`)));
  const bar = h("progress", { id: "upload-progress", max: 1, value: 0, "aria-label": "Upload progress" });
  const fileInput = h("input", { type: "file", id: "upload-file", name: "file", required: true });
  const upForm = h("form", { id: "upload-form", class: "inline" },
    field("File", fileInput), h("button", { type: "submit", id: "upload" }, "Upload"), bar);
  onSubmit(upForm, out, async () => {
    const file = fileInput.files[0];
    bar.max = file.size || 1;
    bar.value = 0;
    await upload(o, o.prefix + file.name, file, (n) => { bar.value = n; });
    bar.value = bar.max;
    await show();
    return `Uploaded ${o.prefix + file.name} (${bytes(file.size)}).`;
  });

  async function show(token) {
    const q = { "list-type": "2", delimiter: "/", "max-keys": "100" };
    if (o.prefix) q.prefix = o.prefix;
    if (token) q["continuation-token"] = token;
    const { xml } = await s3(o, "GET", null, q);
    const r = xml.documentElement;
    const dirs = tag(r, "CommonPrefixes").map((p) => text1(p, "Prefix"));
    const files = tag(r, "Contents").map((c) => ({
      key: text1(c, "Key"), size: Number(text1(c, "Size")), modified: text1(c, "LastModified"),
    }));
    const crumbs = [h("button", { type: "button", class: "link", onclick: () => go("") }, name)];
    let acc = "";
    for (const part of o.prefix.split("/").filter(Boolean)) {
      acc += part + "/";
      const p = acc;
      crumbs.push(" / ", h("button", { type: "button", class: "link", onclick: () => go(p) }, part));
    }
    const next = text1(r, "NextContinuationToken");
    list.replaceChildren(
      h("nav", { class: "crumbs", "aria-label": "Prefix" }, crumbs),
      table(`Objects under ${o.prefix || "/"}`, ["Name", "Size", "Modified", ""], [
        ...dirs.map((d) => [h("button", { type: "button", class: "link", onclick: () => go(d) },
          d.slice(o.prefix.length)), "", "", ""]),
        ...files.map((f) => [
          h("span", { class: "object-name" }, f.key.slice(o.prefix.length)), bytes(f.size),
          f.modified.replace("T", " ").slice(0, 19),
          h("span", { class: "actions" },
            h("button", { type: "button", class: "small", "data-key": f.key, onclick: () => download(f.key) }, "Download"),
            h("button", { type: "button", class: "small secondary", onclick: () => info(f.key) }, "Info"),
            h("button", { type: "button", class: "small danger", "data-delete": f.key, onclick: () => remove(f.key) }, "Delete")),
        ]),
      ]),
      h("div", { class: "actions" },
        o.pages.length > 1 ? h("button", { type: "button", class: "secondary", onclick: () => { o.pages.pop(); show(o.pages[o.pages.length - 1]); } }, "Previous page") : null,
        next ? h("button", { type: "button", id: "next-page", onclick: () => { o.pages.push(next); show(next); } }, "Next page") : null),
      h("div", { id: "object-info" }));
  }
  const go = (p) => { o.prefix = p; o.pages = [null]; show().catch((e) => out.replaceChildren(message(e.message, "error"))); };
  async function download(k) {
    const a = h("a", { href: await presigned(o, "GET", k), download: k.split("/").pop() });
    document.body.append(a);
    a.click();
    a.remove();
  }
  async function info(k) {
    try {
      const head = await fetch(await presigned(o, "HEAD", k), { method: "HEAD", credentials: "omit" });
      const { xml } = await s3(o, "GET", null, { versions: "", prefix: k, "max-keys": "50" });
      const versions = [...xml.documentElement.children].filter((c) => c.localName === "Version" || c.localName === "DeleteMarker")
        .filter((v) => text1(v, "Key") === k)
        .map((v) => [text1(v, "VersionId"), v.localName === "DeleteMarker" ? "delete marker" : bytes(Number(text1(v, "Size"))),
          text1(v, "LastModified").replace("T", " ").slice(0, 19), text1(v, "IsLatest") === "true" ? "latest" : ""]);
      document.getElementById("object-info").replaceChildren(h("h2", {}, k),
        h("dl", { class: "facts" }, [...head.headers.entries()]
          .filter(([n]) => /^(content-|etag|last-modified|x-amz-meta-|x-amz-version-id)/.test(n))
          .map(([n, v]) => [h("dt", {}, n), h("dd", {}, v)])),
        table("Versions", ["Version", "Size", "Modified", ""], versions));
    } catch (e) { out.replaceChildren(message(e.message, "error")); }
  }
  async function remove(k) {
    if (!confirm(`Delete ${k}?`)) return;
    try { await s3(o, "DELETE", k); await show(); out.replaceChildren(message(`Deleted ${k}.`, "ok")); } catch (e) { out.replaceChildren(message(e.message, "error")); }
  }

  view(h("h1", {}, "Objects of " + name),
    h("div", { class: "inline" }, field("Act as key", keySelect), h("a", { href: "#/bucket/" + id }, "Bucket settings")),
    upForm, out, list);
  await show();
}

// ---- Keys ----

async function keys() {
  const view = guardedView();
  const list = await get("ListKeys");
  const out = h("div", {});
  const form = h("form", { id: "create-key", class: "inline" },
    field("Name", h("input", { name: "name", id: "key-name", required: true })),
    h("button", { type: "submit" }, "Create key"));
  onSubmit(form, out, async (fd) => {
    const k = await post("CreateKey", { name: fd.get("name") });
    await keys();
    document.getElementById("key-secret").replaceChildren(
      h("div", { class: "card secret", role: "status" },
        h("p", {}, "Key created. Copy the secret now: it is not shown again."),
        h("dl", { class: "facts" },
          h("dt", {}, "Access key id"), h("dd", {}, h("code", { id: "new-key-id" }, k.accessKeyId)),
          h("dt", {}, "Secret key"), h("dd", {}, h("code", { id: "new-key-secret" }, k.secretAccessKey)))));
  });
  view(
    h("h1", {}, "Keys"),
    form, out, h("div", { id: "key-secret" }),
    table("Access keys", ["Key", "Name", ""], list.map((k) => [
      h("a", { href: "#/key/" + k.id }, h("code", {}, k.id)), k.name,
      h("button", { type: "button", class: "danger small", "aria-label": "Delete key " + k.name, onclick: async () => {
        if (!confirm(`Delete key ${k.name} (${k.id})?`)) return;
        try { await post("DeleteKey?id=" + encodeURIComponent(k.id)); await keys(); } catch (e) { out.replaceChildren(message(e.message, "error")); }
      } }, "Delete"),
    ])),
  );
}

async function key(id) {
  const view = guardedView();
  const k = await get("GetKeyInfo?id=" + encodeURIComponent(id));
  const out = h("div", {});
  const may = k.permissions.createBucket;
  const toggle = h("button", { type: "button", id: "create-bucket-permission", onclick: async () => {
    try {
      await post("UpdateKey?id=" + encodeURIComponent(id), may ? { deny: { createBucket: true } } : { allow: { createBucket: true } });
      await key(id);
    } catch (e) { out.replaceChildren(message(e.message, "error")); }
  } }, may ? "Forbid creating buckets" : "Allow creating buckets");
  view(h("h1", {}, "Key " + k.name),
    h("dl", { class: "facts" },
      h("dt", {}, "Access key id"), h("dd", {}, h("code", {}, k.accessKeyId)),
      h("dt", {}, "May create buckets"), h("dd", { id: "may-create" }, may ? "yes" : "no")),
    h("div", { class: "actions" }, toggle), out,
    h("h2", {}, "Buckets"),
    table("Buckets this key may use", ["Bucket", "Read", "Write", "Owner"], k.buckets.map((b) => [
      h("a", { href: "#/bucket/" + b.id }, b.globalAliases[0] || b.localAliases[0] || b.id.slice(0, 16)),
      b.permissions.read ? "yes" : "", b.permissions.write ? "yes" : "", b.permissions.owner ? "yes" : "",
    ])));
}

// ---- Notification topics: where buckets' events go ----

// A node's id as the tables show it.
const nodeCell = (id) => h("code", { title: id }, id.slice(0, 16));

// The rows of a `Get…Backlog?node=*` answer: per node, a row for each of
// its entries that `mine` keeps (`row` makes its cells), or one row of
// `empty` cells; and a message per node that did not answer.
function perNode(caption, head, multi, mine, row, empty) {
  const rows = [];
  for (const [id, list] of Object.entries(multi.success || {}).sort()) {
    const kept = (list || []).filter(mine);
    if (!kept.length) rows.push([nodeCell(id), ...empty]);
    for (const x of kept) rows.push([nodeCell(id), ...row(x)]);
  }
  return [table(caption, head, rows),
    Object.entries(multi.error || {}).map(([id, e]) => message(`Node ${id.slice(0, 16)}: ${e}`, "error"))];
}

// A topic's attributes, one KEY=VALUE a line.
function parseAttributes(text) {
  const out = {};
  for (const line of String(text || "").split("\n").map((l) => l.trim()).filter(Boolean)) {
    const i = line.indexOf("=");
    if (i < 1) throw new Error(`attributes: give one KEY=VALUE a line ("${line}" is not one)`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

const when = (t) => (t || "").replace("T", " ").slice(0, 19);

async function deleteTopic(name) {
  if (!confirm(`Delete topic ${name}? The events waiting for it are dropped.`)) return false;
  await post("DeleteTopic?name=" + encodeURIComponent(name));
  return true;
}

async function topics() {
  const view = guardedView();
  const list = await get("ListTopics");
  const out = h("div", { id: "topics-msg" });
  const form = h("form", { id: "create-topic", class: "inline" },
    field("Name", h("input", { name: "name", id: "topic-name", required: true })),
    field("Endpoint: a webhook, NATS, AMQP, Kafka or MQTT URL", h("input", { name: "endpoint", id: "topic-endpoint", required: true, autocomplete: "off" })),
    field("Attributes (optional; one KEY=VALUE a line)", h("textarea", { name: "attributes", id: "topic-attributes", rows: 1 })),
    field("Owner access key id (optional)", h("input", { name: "owner", id: "topic-owner" })),
    h("button", { type: "submit" }, "Create topic"));
  onSubmit(form, out, async (fd) => {
    const owner = String(fd.get("owner")).trim();
    const t = await post("CreateTopic", {
      name: String(fd.get("name")).trim(),
      endpoint: String(fd.get("endpoint")).trim(),
      attributes: parseAttributes(fd.get("attributes")),
      owner: owner || null,
    });
    await topics();
    const msg = document.getElementById("topics-msg");
    if (msg) msg.replaceChildren(message(`Topic ${t.name} created: notification rules name it ${t.arn}.`, "ok"));
  });
  view(
    h("h1", {}, "Notification topics"),
    h("p", {}, "A bucket's notification rules (PutBucketNotificationConfiguration) send its events to topics, " +
      "named by their ARN. Each node keeps the events it has not sent yet in its outbox. " +
      "Creating a topic with the name of one that exists replaces its configuration."),
    form, out,
    table("Notification topics (endpoint passwords are never shown)", ["Topic", "Kind", "Endpoint", "ARN", "Owner", "Created", ""],
      list.map((t) => [
        h("a", { href: "#/topic/" + t.name, "data-topic": t.name }, t.name),
        t.kind, h("code", {}, t.endpoint), h("code", {}, t.arn), t.owner || "", when(t.created),
        h("button", { type: "button", class: "small danger", "data-topic-delete": t.name, "aria-label": "Delete topic " + t.name,
          onclick: async () => {
            try { if (await deleteTopic(t.name)) await topics(); } catch (e) { out.replaceChildren(message(e.message, "error")); }
          } }, "Delete"),
      ])),
  );
}

async function topic(name) {
  const view = guardedView();
  const [t, backlogR] = await Promise.all([
    get("GetTopicInfo?name=" + encodeURIComponent(name)),
    soft(get("GetNotificationBacklog?node=*")),
  ]);
  const out = h("div", {});
  const del = h("button", { type: "button", id: "delete-topic", class: "danger", onclick: async () => {
    try { if (await deleteTopic(t.name)) location.hash = "#/topics"; } catch (e) { out.replaceChildren(message(e.message, "error")); }
  } }, "Delete topic");
  view(
    h("h1", {}, "Topic " + t.name),
    h("p", {}, h("a", { href: "#/topics" }, "All topics")),
    h("dl", { class: "facts" },
      [["ARN", t.arn], ["Kind", t.kind], ["Endpoint", t.endpoint], ["Owner", t.owner || "none"], ["Created", when(t.created)]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v)])),
    h("h2", {}, "Attributes"),
    table("The topic's other attributes", ["Attribute", "Value"], Object.entries(t.attributes || {})),
    h("section", { id: "topic-backlog" }, h("h2", {}, "Backlog"),
      backlogR.e ? refusal(backlogR) : perNode("Events for this topic waiting in each node's outbox",
        ["Node", "Events", "Bytes"], backlogR.v, (x) => x.topic === t.name,
        (x) => [String(x.events), bytes(x.bytes)], ["0", bytes(0)])),
    h("div", { class: "actions" }, del), out,
  );
}

// ---- Replication remotes: other S3 endpoints that buckets replicate to ----

// The destination ARN (arn:garage:s3:::REMOTE/BUCKET) of a replication
// rule, linked to its remote's page.
function destination(arn) {
  const m = /^arn:garage:s3:::([A-Za-z0-9_-]+)\//.exec(arn || "");
  const code = h("code", {}, arn);
  return m ? h("a", { href: "#/remote/" + m[1], "data-remote": m[1] }, code) : code;
}

async function deleteRemote(name) {
  if (!confirm(`Delete remote ${name}? The versions waiting for its buckets are marked FAILED ` +
    "(a resync sends them once a remote of that name is added again).")) return false;
  await post("DeleteRemote?name=" + encodeURIComponent(name));
  return true;
}

async function remotes() {
  const view = guardedView();
  const list = await get("ListRemotes");
  const out = h("div", { id: "remotes-msg" });
  const secret = h("input", { name: "secretAccessKey", id: "remote-secret", type: "password", autocomplete: "new-password", required: true });
  const form = h("form", { id: "add-remote", class: "inline" },
    field("Name", h("input", { name: "name", id: "remote-name", required: true })),
    field("S3 endpoint (scheme, host and port)", h("input", { name: "endpoint", id: "remote-endpoint", required: true })),
    field("Region", h("input", { name: "region", id: "remote-region", value: "garage", required: true })),
    field("Access key id", h("input", { name: "accessKeyId", id: "remote-key-id", required: true, autocomplete: "off" })),
    field("Secret key (stored, never shown)", secret),
    h("button", { type: "submit" }, "Add remote"));
  onSubmit(form, out, async (fd) => {
    const r = await post("AddRemote", {
      name: String(fd.get("name")).trim(),
      endpoint: String(fd.get("endpoint")).trim(),
      region: String(fd.get("region")).trim(),
      accessKeyId: String(fd.get("accessKeyId")).trim(),
      secretAccessKey: String(fd.get("secretAccessKey")),
    });
    // The secret is the cluster's now: the page keeps no copy of it.
    secret.value = "";
    await remotes();
    const msg = document.getElementById("remotes-msg");
    if (msg) msg.replaceChildren(message(`Remote ${r.name} added: replication rules name its buckets ${r.destinationArnPattern}.`, "ok"));
  });
  view(
    h("h1", {}, "Replication remotes"),
    h("p", {}, "A bucket's replication rules (PutBucketReplication, on a bucket with versioning enabled) copy its new " +
      "versions to a bucket of a remote: another S3 endpoint, with an access key that may write there. A rule names " +
      "bucket BUCKET of remote NAME as its destination ", h("code", {}, "arn:garage:s3:::NAME/BUCKET"), ". " +
      "Adding a remote with the name of one that exists replaces its configuration."),
    form, out,
    table("Replication remotes (their secret keys are never shown)",
      ["Remote", "Endpoint", "Region", "Access key id", "Rules name its buckets", "Created", ""],
      list.map((r) => [
        h("a", { href: "#/remote/" + r.name, "data-remote": r.name }, r.name),
        h("code", {}, r.endpoint), r.region, h("code", {}, r.accessKeyId),
        h("code", { "data-arn": r.name }, r.destinationArnPattern), when(r.created),
        h("button", { type: "button", class: "small danger", "data-remote-delete": r.name, "aria-label": "Delete remote " + r.name,
          onclick: async () => {
            try { if (await deleteRemote(r.name)) await remotes(); } catch (e) { out.replaceChildren(message(e.message, "error")); }
          } }, "Delete"),
      ])),
  );
}

async function remote(name) {
  const view = guardedView();
  const [r, backlogR] = await Promise.all([
    get("GetRemoteInfo?name=" + encodeURIComponent(name)),
    soft(get("GetReplicationBacklog?node=*")),
  ]);
  const out = h("div", {});
  const del = h("button", { type: "button", id: "delete-remote", class: "danger", onclick: async () => {
    try { if (await deleteRemote(r.name)) location.hash = "#/remotes"; } catch (e) { out.replaceChildren(message(e.message, "error")); }
  } }, "Delete remote");
  view(
    h("h1", {}, "Remote " + r.name),
    h("p", {}, h("a", { href: "#/remotes" }, "All remotes")),
    h("dl", { class: "facts" },
      [["Endpoint", r.endpoint], ["Region", r.region], ["Access key id", r.accessKeyId],
        ["Secret key", "stored, never shown"], ["Rules name its buckets", h("code", { id: "remote-arn" }, r.destinationArnPattern)],
        ["Created", when(r.created)]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v)])),
    h("section", { id: "remote-backlog" }, h("h2", {}, "Backlog"),
      backlogR.e ? refusal(backlogR) : perNode("Versions waiting in each node's replication queue for this remote's buckets",
        ["Node", "Destination", "Versions", "Queue bytes", "Oldest queued"], backlogR.v,
        (x) => x.destination.startsWith(r.name + "/"),
        (x) => [x.destination, String(x.versions), bytes(x.bytes), when(x.oldestQueued)], ["—", "0", bytes(0), ""])),
    h("div", { class: "actions" }, del), out,
  );
}

// ---- Identities: IAM users, groups, managed policies, roles, OpenID Connect providers ----
// Every action is one IamCall: AWS's IAM action by name with AWS's
// parameters, answered with AWS's result structure (errors with AWS's
// codes and words, shown as they are).

const iam = (action, params) => post("IamCall", { action, params: params || {} });

const IAM_PAGES = [
  ["#/users", "Users"], ["#/groups", "Groups"], ["#/policies", "Policies"],
  ["#/roles", "Roles"], ["#/oidc-providers", "OpenID Connect providers"],
];

// The identities pages' own navigation.
const iamNav = (current) => h("nav", { class: "subnav", "aria-label": "Identities" },
  IAM_PAGES.map(([href, label]) => h("a", { href, "aria-current": href === current ? "page" : null }, label)));

// The route of an IAM entity's page (names may hold + = , . @ and, for
// ARNs, / and :).
const iamHref = (kind, name) => `#/${kind}/${encodeURIComponent(name)}`;
const iamLink = (kind, name, attrs, text) => h("a", Object.assign({ href: iamHref(kind, name) }, attrs || {}), text ?? name);

// The first answer of an identities page: its value, or, when the token's
// scope does not allow IamCall, the page saying so (null).
async function iamFirst(view, title, current, p) {
  const r = await soft(p);
  if (!r.e) return r.v;
  if (!outOfScope(r.e)) throw r.e;
  view(h("h1", {}, title), iamNav(current), refusal(r));
  return null;
}

// A policy document as IAM answers it (URL-encoded), as indented JSON.
function policyText(encoded) {
  let text = encoded || "";
  try { text = decodeURIComponent(text); } catch (_) { /* not encoded */ }
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (_) { return text; }
}

const isBuiltin = (arn) => arn.startsWith("arn:aws:iam::aws:policy/");

// Whether a user or role is enabled, when the answer says so (garage's
// own `Enabled`); "unknown" otherwise.
function enabledText(x) {
  if (x.Enabled === undefined || x.Enabled === null) return "unknown";
  return x.Enabled === true || x.Enabled === "true" ? "yes" : "no";
}

// Says `m` in the message line `id` of the page shown now.
function say(id, m) {
  const el = document.getElementById(id);
  if (el) el.replaceChildren(m);
}

// Runs the IAM change `f` from a page, shows the page again (`reload`)
// and says `said` in its message line `id`; a refusal is shown there as
// the API words it (a DeleteConflict names what is left).
async function iamChange(id, reload, f, said) {
  try {
    await f();
    await reload();
    if (said) say(id, message(said, "ok"));
  } catch (e) {
    say(id, message(e.message, "error"));
  }
}

// A form whose submission is one IAM change: a refusal shows in `out`
// (a message line, or its id in the page shown); `f` returns what to say
// in the same line once the page is shown again.
function iamForm(form, out, reload, f) {
  if (typeof out === "string") out = document.getElementById(out) || msgLine(out);
  onSubmit(form, out, async (fd) => {
    const said = await f(fd);
    await reload();
    if (said) say(out.id, message(said, "ok"));
  });
}

// A section's message line.
const msgLine = (id) => h("div", { id, class: "msg-line" });

// A field for a JSON policy document.
const docField = (label, id, value) => field(label, h("textarea", {
  name: "document", id, class: "doc", rows: 8, required: true, spellcheck: "false",
  placeholder: '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::BUCKET/*"}]}',
}, value || ""));

// The inline and attached policies of a user, group or role (`kind`:
// "User", "Group" or "Role"): view, put and delete inline ones; attach
// (from the managed ones, AWS's built-ins included) and detach.
async function holderPolicies(kind, name, reload) {
  const who = kind.toLowerCase();
  const p = { [kind + "Name"]: name };
  const [inline, attached, all] = await Promise.all([
    iam(`List${kind}Policies`, p), iam(`ListAttached${kind}Policies`, p), iam("ListPolicies"),
  ]);
  const shown = h("div", { id: "inline-view" });
  const inlineRows = (inline.PolicyNames || []).map((n) => [
    n,
    h("span", { class: "actions" },
      h("button", { type: "button", class: "small secondary", "data-inline-view": n, "aria-label": "View inline policy " + n,
        onclick: async () => {
          try {
            const d = await iam(`Get${kind}Policy`, Object.assign({ PolicyName: n }, p));
            shown.replaceChildren(h("h3", {}, `Inline policy ${n}`), h("pre", { id: "inline-document" }, policyText(d.PolicyDocument)));
          } catch (e) { say("inline-msg", message(e.message, "error")); }
        } }, "View"),
      h("button", { type: "button", class: "small danger", "data-inline-delete": n, "aria-label": "Delete inline policy " + n,
        onclick: () => confirm(`Delete inline policy ${n} of ${who} ${name}?`) &&
          iamChange("inline-msg", reload, () => iam(`Delete${kind}Policy`, Object.assign({ PolicyName: n }, p)),
            `Inline policy ${n} deleted.`) }, "Delete")),
  ]);
  const putForm = h("form", { id: "put-inline", class: "stack" },
    field("Policy name (an existing name is replaced)", h("input", { name: "name", id: "inline-name", required: true })),
    docField("Policy document (JSON)", "inline-doc"),
    h("div", {}, h("button", { type: "submit" }, "Put inline policy")));

  const have = new Set((attached.AttachedPolicies || []).map((a) => a.PolicyArn));
  const attachable = (all.Policies || []).filter((x) => !have.has(x.Arn));
  const attachRows = (attached.AttachedPolicies || []).map((a) => [
    iamLink("policy", a.PolicyArn, { "data-attached": a.PolicyName }, a.PolicyName), h("code", {}, a.PolicyArn),
    h("button", { type: "button", class: "small danger", "data-detach": a.PolicyName, "aria-label": "Detach policy " + a.PolicyName,
      onclick: () => iamChange("attached-msg", reload, () => iam(`Detach${kind}Policy`, Object.assign({ PolicyArn: a.PolicyArn }, p)),
        `Policy ${a.PolicyName} detached.`) }, "Detach"),
  ]);
  const attachForm = attachable.length ? h("form", { id: "attach-policy", class: "inline" },
    field("Managed policy", h("select", { name: "arn", id: "attach-arn", required: true },
      attachable.map((x) => h("option", { value: x.Arn }, isBuiltin(x.Arn) ? `${x.PolicyName} (AWS built-in)` : x.PolicyName)))),
    h("button", { type: "submit" }, "Attach")) : message("Every managed policy is attached.");

  const inlineMsg = msgLine("inline-msg");
  const attachedMsg = msgLine("attached-msg");
  iamForm(putForm, inlineMsg, reload, async (fd) => {
    const n = String(fd.get("name")).trim();
    await iam(`Put${kind}Policy`, Object.assign({ PolicyName: n, PolicyDocument: String(fd.get("document")) }, p));
    return `Inline policy ${n} put.`;
  });
  if (attachable.length) iamForm(attachForm, attachedMsg, reload, async (fd) => {
    const arn = String(fd.get("arn"));
    await iam(`Attach${kind}Policy`, Object.assign({ PolicyArn: arn }, p));
    return `Policy ${arn} attached.`;
  });
  return h("section", { id: "policies-of" },
    h("h2", {}, "Inline policies"),
    table(`Policies of ${who} ${name} alone`, ["Policy", ""], inlineRows),
    inlineMsg, shown, putForm,
    h("h2", {}, "Attached managed policies"),
    table(`Managed policies attached to ${who} ${name}`, ["Policy", "ARN", ""], attachRows),
    attachedMsg, attachForm);
}

// ---- Users ----

async function users() {
  const view = guardedView();
  const r = await iamFirst(view, "Users", "#/users", iam("ListUsers"));
  if (!r) return;
  const list = r.Users || [];
  const form = h("form", { id: "create-user", class: "inline" },
    field("User name", h("input", { name: "name", id: "user-name", required: true, autocomplete: "off" })),
    h("button", { type: "submit" }, "Create user"));
  // Each user's groups, read for the users shown, a few at a time.
  const groupCells = new Map(list.map((u) => [u.UserName, h("td", { "data-user-groups": u.UserName }, "…")]));
  const rows = list.map((u) => h("tr", {},
    h("td", {}, iamLink("user", u.UserName, { "data-user": u.UserName })),
    h("td", {}, h("code", {}, u.UserId)), h("td", {}, when(u.CreateDate)),
    h("td", { "data-user-enabled": u.UserName }, enabledText(u)),
    groupCells.get(u.UserName),
    h("td", {}, h("button", { type: "button", class: "small danger", "data-user-delete": u.UserName, "aria-label": "Delete user " + u.UserName,
      onclick: () => confirm(`Delete user ${u.UserName}? Its keys, policies and groups must be removed first.`) &&
        iamChange("users-msg", users, () => iam("DeleteUser", { UserName: u.UserName }), `User ${u.UserName} deleted.`) }, "Delete"))));
  view(
    h("h1", {}, "Users"), iamNav("#/users"),
    h("p", {}, "IAM users: each acts with its access keys (AKIA…), by the policies of its own and of its groups. " +
      "Keys of their own (the Keys page) are not IAM users."),
    form, msgLine("users-msg"),
    h("div", { class: "scroll" }, h("table", { id: "user-list" },
      h("caption", {}, "IAM users"),
      h("thead", {}, h("tr", {}, ["User", "Id", "Created", "Enabled", "Groups", ""].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 6 }, "none"))))),
  );
  iamForm(form, "users-msg", users, async (fd) => {
    const n = String(fd.get("name")).trim();
    await iam("CreateUser", { UserName: n });
    return `User ${n} created: give it policies or groups, then an access key.`;
  });
  const queue = [...list];
  const worker = async () => {
    for (let u = queue.shift(); u; u = queue.shift()) {
      const cell = groupCells.get(u.UserName);
      if (!cell.isConnected) return; // the page was left
      try {
        const g = await iam("ListGroupsForUser", { UserName: u.UserName });
        cell.replaceChildren(...(g.Groups || []).flatMap((x, i) => [i ? ", " : "", iamLink("group", x.GroupName)]));
        if (!(g.Groups || []).length) cell.textContent = "none";
      } catch (e) {
        cell.textContent = "?";
        cell.title = e.message;
      }
    }
  };
  await Promise.all([1, 2, 3, 4].map(worker));
}

// Enable and disable buttons for a user or role (`kind`); both while its
// state is unknown.
function switchButtons(kind, name, state, msgId, reload) {
  const who = kind.toLowerCase();
  const set = (on) => () => {
    if (!on && !confirm(kind === "User"
      ? `Disable user ${name}? Its keys and sessions are refused at once, until it is enabled again.`
      : `Disable role ${name}? Its sessions are refused at once, and it cannot be assumed, until it is enabled again.`)) return;
    return iamChange(msgId, reload, () => iam(`Set${kind}Enabled`, { [kind + "Name"]: name, Enabled: String(on) }),
      on ? `${kind} ${name} enabled.` : `${kind} ${name} disabled: ${kind === "User" ? "its keys are" : "its sessions are"} refused.`);
  };
  return [
    state !== "yes" ? h("button", { type: "button", id: `enable-${who}`, onclick: set(true) }, `Enable ${who}`) : null,
    state !== "no" ? h("button", { type: "button", id: `disable-${who}`, class: "danger", onclick: set(false) }, `Disable ${who}`) : null,
  ];
}

async function user(enc) {
  const name = decodeURIComponent(enc);
  const view = guardedView();
  const reload = () => user(enc);
  const p = { UserName: name };
  const first = await iamFirst(view, "User " + name, "#/users", Promise.all([
    iam("GetUser", p), iam("ListAccessKeys", p), iam("ListGroupsForUser", p), iam("ListGroups"),
  ]));
  if (!first) return;
  const [{ User: u }, keys, groups, allGroups] = first;
  const policies = await holderPolicies("User", name, reload);
  const state = enabledText(u);

  const keyRows = (keys.AccessKeyMetadata || []).map((k) => [
    h("code", {}, k.AccessKeyId), h("span", { "data-key-status": k.AccessKeyId }, k.Status), when(k.CreateDate),
    h("span", { class: "actions" },
      h("button", { type: "button", class: "small secondary", "data-key-toggle": k.AccessKeyId,
        "aria-label": (k.Status === "Active" ? "Make inactive key " : "Make active key ") + k.AccessKeyId,
        onclick: () => iamChange("keys-msg", reload, () => iam("UpdateAccessKey", Object.assign({
          AccessKeyId: k.AccessKeyId, Status: k.Status === "Active" ? "Inactive" : "Active" }, p)),
        `Key ${k.AccessKeyId} made ${k.Status === "Active" ? "inactive: it is refused" : "active"}.`) },
      k.Status === "Active" ? "Make inactive" : "Make active"),
      h("button", { type: "button", class: "small danger", "data-key-delete": k.AccessKeyId, "aria-label": "Delete key " + k.AccessKeyId,
        onclick: () => confirm(`Delete access key ${k.AccessKeyId} of user ${name}?`) &&
          iamChange("keys-msg", reload, () => iam("DeleteAccessKey", Object.assign({ AccessKeyId: k.AccessKeyId }, p)),
            `Key ${k.AccessKeyId} deleted.`) }, "Delete")),
  ]);
  const newKey = h("button", { type: "button", id: "create-access-key", onclick: async () => {
    newKey.disabled = true;
    try {
      const k = (await iam("CreateAccessKey", p)).AccessKey;
      await reload();
      // Shown this once: no answer carries the secret again, and the page
      // forgets it when it is shown again.
      say("iam-secret", h("div", { class: "card secret", role: "status" },
        h("p", {}, "Access key created. Copy the secret now: it is shown this once, never again."),
        h("dl", { class: "facts" },
          h("dt", {}, "Access key id"), h("dd", {}, h("code", { id: "new-access-key-id" }, k.AccessKeyId)),
          h("dt", {}, "Secret access key"), h("dd", {}, h("code", { id: "new-access-key-secret" }, k.SecretAccessKey)))));
    } catch (e) {
      newKey.disabled = false;
      say("keys-msg", message(e.message, "error"));
    }
  } }, "Create access key");

  const mine = new Set((groups.Groups || []).map((g) => g.GroupName));
  const others = (allGroups.Groups || []).filter((g) => !mine.has(g.GroupName));
  const groupRows = (groups.Groups || []).map((g) => [
    iamLink("group", g.GroupName),
    h("button", { type: "button", class: "small secondary", "data-group-remove": g.GroupName, "aria-label": "Remove from group " + g.GroupName,
      onclick: () => iamChange("groups-msg", reload, () => iam("RemoveUserFromGroup", Object.assign({ GroupName: g.GroupName }, p)),
        `Removed from group ${g.GroupName}.`) }, "Remove"),
  ]);
  const addForm = others.length ? h("form", { id: "add-to-group", class: "inline" },
    field("Group", h("select", { name: "group", id: "user-add-group", required: true },
      others.map((g) => h("option", { value: g.GroupName }, g.GroupName)))),
    h("button", { type: "submit" }, "Add to group")) : message((allGroups.Groups || []).length ? "The user is in every group." : "No group yet: groups are made on the Groups page.");

  const del = h("button", { type: "button", id: "delete-user", class: "danger", onclick: async () => {
    if (!confirm(`Delete user ${name}? Its keys, policies and groups must be removed first.`)) return;
    try {
      await iam("DeleteUser", p);
      location.hash = "#/users";
    } catch (e) { say("user-msg", message(e.message, "error")); }
  } }, "Delete user");

  view(
    h("h1", {}, "User " + name), iamNav("#/users"),
    h("dl", { class: "facts" },
      [["ARN", h("code", {}, u.Arn)], ["Id", h("code", {}, u.UserId)], ["Path", u.Path], ["Created", when(u.CreateDate)],
        ["Enabled", state], ["Tags", (u.Tags || []).map((t) => `${t.Key}=${t.Value}`).join(", ") || "none"]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v)])),
    h("div", { class: "actions" }, switchButtons("User", name, state, "user-msg", reload), del),
    msgLine("user-msg"),
    h("section", { id: "access-keys" }, h("h2", {}, "Access keys"),
      table(`Access keys of user ${name} (at most 2)`, ["Access key id", "Status", "Created", ""], keyRows),
      h("div", { class: "actions" }, newKey), msgLine("keys-msg"), h("div", { id: "iam-secret" })),
    h("section", { id: "user-groups" }, h("h2", {}, "Groups"),
      table(`Groups of user ${name}`, ["Group", ""], groupRows), msgLine("groups-msg"), addForm),
    policies,
  );
  if (others.length) iamForm(addForm, "groups-msg", reload, async (fd) => {
    const g = String(fd.get("group"));
    await iam("AddUserToGroup", Object.assign({ GroupName: g }, p));
    return `Added to group ${g}.`;
  });
}

// ---- Groups ----

async function groups() {
  const view = guardedView();
  const r = await iamFirst(view, "Groups", "#/groups", iam("ListGroups"));
  if (!r) return;
  const form = h("form", { id: "create-group", class: "inline" },
    field("Group name", h("input", { name: "name", id: "group-name", required: true, autocomplete: "off" })),
    h("button", { type: "submit" }, "Create group"));
  view(
    h("h1", {}, "Groups"), iamNav("#/groups"),
    h("p", {}, "A group's policies apply to each of its users."),
    form, msgLine("groups-msg"),
    table("IAM groups", ["Group", "Id", "Created", ""], (r.Groups || []).map((g) => [
      iamLink("group", g.GroupName, { "data-group": g.GroupName }), h("code", {}, g.GroupId), when(g.CreateDate),
      h("button", { type: "button", class: "small danger", "data-group-delete": g.GroupName, "aria-label": "Delete group " + g.GroupName,
        onclick: () => confirm(`Delete group ${g.GroupName}? Its users and policies must be removed first.`) &&
          iamChange("groups-msg", groups, () => iam("DeleteGroup", { GroupName: g.GroupName }), `Group ${g.GroupName} deleted.`) }, "Delete"),
    ])),
  );
  iamForm(form, "groups-msg", groups, async (fd) => {
    const n = String(fd.get("name")).trim();
    await iam("CreateGroup", { GroupName: n });
    return `Group ${n} created.`;
  });
}

async function group(enc) {
  const name = decodeURIComponent(enc);
  const view = guardedView();
  const reload = () => group(enc);
  const p = { GroupName: name };
  const first = await iamFirst(view, "Group " + name, "#/groups", Promise.all([iam("GetGroup", p), iam("ListUsers")]));
  if (!first) return;
  const [{ Group: g, Users: members }, all] = first;
  const policies = await holderPolicies("Group", name, reload);
  const inIt = new Set((members || []).map((u) => u.UserName));
  const others = (all.Users || []).filter((u) => !inIt.has(u.UserName));
  const addForm = others.length ? h("form", { id: "add-member", class: "inline" },
    field("User", h("select", { name: "user", id: "group-add-user", required: true },
      others.map((u) => h("option", { value: u.UserName }, u.UserName)))),
    h("button", { type: "submit" }, "Add user"))
    : message((all.Users || []).length ? "Every user is in this group." : "No user yet: users are made on the Users page.");
  const del = h("button", { type: "button", id: "delete-group", class: "danger", onclick: async () => {
    if (!confirm(`Delete group ${name}? Its users and policies must be removed first.`)) return;
    try {
      await iam("DeleteGroup", p);
      location.hash = "#/groups";
    } catch (e) { say("group-msg", message(e.message, "error")); }
  } }, "Delete group");
  view(
    h("h1", {}, "Group " + name), iamNav("#/groups"),
    h("dl", { class: "facts" },
      [["ARN", h("code", {}, g.Arn)], ["Id", h("code", {}, g.GroupId)], ["Path", g.Path], ["Created", when(g.CreateDate)]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v)])),
    h("section", { id: "members" }, h("h2", {}, "Members"),
      table(`Users in group ${name}`, ["User", ""], (members || []).map((u) => [
        iamLink("user", u.UserName),
        h("button", { type: "button", class: "small secondary", "data-member-remove": u.UserName, "aria-label": "Remove user " + u.UserName,
          onclick: () => iamChange("members-msg", reload, () => iam("RemoveUserFromGroup", { GroupName: name, UserName: u.UserName }),
            `User ${u.UserName} removed.`) }, "Remove"),
      ])),
      msgLine("members-msg"), addForm),
    policies,
    h("div", { class: "actions" }, del), msgLine("group-msg"),
  );
  if (others.length) iamForm(addForm, "members-msg", reload, async (fd) => {
    const u = String(fd.get("user"));
    await iam("AddUserToGroup", { GroupName: name, UserName: u });
    return `User ${u} added.`;
  });
}

// ---- Managed policies ----

async function policies() {
  const view = guardedView();
  const r = await iamFirst(view, "Policies", "#/policies", iam("ListPolicies"));
  if (!r) return;
  const form = h("form", { id: "create-policy", class: "stack" },
    field("Policy name", h("input", { name: "name", id: "policy-name", required: true, autocomplete: "off" })),
    field("Description (optional)", h("input", { name: "description", id: "policy-description" })),
    docField("Policy document (JSON)", "policy-document"),
    h("div", {}, h("button", { type: "submit" }, "Create policy")));
  view(
    h("h1", {}, "Managed policies"), iamNav("#/policies"),
    h("p", {}, "A managed policy is attached to users, groups and roles by its ARN. AWS's built-in ones are served " +
      "under their AWS ARN. A policy has one version: to change one, delete it and create it again."),
    table("Managed policies", ["Policy", "Kind", "ARN", "Attachments", "Created", ""], (r.Policies || []).map((x) => {
      const builtin = isBuiltin(x.Arn);
      return [iamLink("policy", x.Arn, { "data-policy": x.PolicyName }, x.PolicyName), builtin ? "AWS built-in" : "customer", h("code", {}, x.Arn), x.AttachmentCount,
        builtin ? "" : when(x.CreateDate),
        builtin ? "" : h("button", { type: "button", class: "small danger", "data-policy-delete": x.PolicyName,
          "aria-label": "Delete policy " + x.PolicyName,
          onclick: () => confirm(`Delete policy ${x.PolicyName}? It must be detached everywhere first.`) &&
            iamChange("policies-msg", policies, () => iam("DeletePolicy", { PolicyArn: x.Arn }), `Policy ${x.PolicyName} deleted.`) }, "Delete")];
    })),
    msgLine("policies-msg"),
    h("h2", {}, "Create a policy"), form, msgLine("create-policy-msg"),
  );
  iamForm(form, "create-policy-msg", policies, async (fd) => {
    const params = { PolicyName: String(fd.get("name")).trim(), PolicyDocument: String(fd.get("document")) };
    const d = String(fd.get("description")).trim();
    if (d) params.Description = d;
    const made = (await iam("CreatePolicy", params)).Policy;
    return `Policy ${made.PolicyName} created: attach it by its ARN ${made.Arn}.`;
  });
}

async function policy(enc) {
  const arn = decodeURIComponent(enc);
  const view = guardedView();
  const first = await iamFirst(view, "Policy", "#/policies", Promise.all([
    iam("GetPolicy", { PolicyArn: arn }), iam("GetPolicyVersion", { PolicyArn: arn, VersionId: "v1" }),
  ]));
  if (!first) return;
  const [{ Policy: x }, { PolicyVersion: v }] = first;
  const builtin = isBuiltin(arn);
  const del = builtin ? null : h("button", { type: "button", id: "delete-policy", class: "danger", onclick: async () => {
    if (!confirm(`Delete policy ${x.PolicyName}? It must be detached everywhere first.`)) return;
    try {
      await iam("DeletePolicy", { PolicyArn: arn });
      location.hash = "#/policies";
    } catch (e) { say("policy-msg", message(e.message, "error")); }
  } }, "Delete policy");
  view(
    h("h1", {}, "Policy " + x.PolicyName), iamNav("#/policies"),
    h("dl", { class: "facts" },
      [["ARN", h("code", {}, x.Arn)], ["Id", h("code", {}, x.PolicyId)], ["Kind", builtin ? "AWS built-in" : "customer"],
        ["Description", x.Description || "none"], ["Attachments", x.AttachmentCount]]
        .map(([k, val]) => [h("dt", {}, k), h("dd", { "data-fact": k }, val)])),
    h("h2", {}, "Document"),
    h("pre", { id: "policy-document-view" }, policyText(v.Document)),
    h("div", { class: "actions" }, del), msgLine("policy-msg"),
  );
}

// ---- Roles ----

async function roles() {
  const view = guardedView();
  const r = await iamFirst(view, "Roles", "#/roles", iam("ListRoles"));
  if (!r) return;
  const form = h("form", { id: "create-role", class: "stack" },
    field("Role name", h("input", { name: "name", id: "role-name", required: true, autocomplete: "off" })),
    field("Description (optional)", h("input", { name: "description", id: "role-description" })),
    field("Longest session in seconds (optional; 3600 to 43200)", h("input", { name: "max", id: "role-max-session", inputmode: "numeric" })),
    docField("Trust policy (JSON): who may assume the role", "role-trust"),
    h("div", {}, h("button", { type: "submit" }, "Create role")));
  view(
    h("h1", {}, "Roles"), iamNav("#/roles"),
    h("p", {}, "A role gives temporary credentials (STS AssumeRole, AssumeRoleWithWebIdentity) to those its trust " +
      "policy names; its sessions act with its policies."),
    table("IAM roles", ["Role", "Id", "Created", "Longest session", "Enabled", ""], (r.Roles || []).map((x) => [
      iamLink("role", x.RoleName, { "data-role": x.RoleName }), h("code", {}, x.RoleId), when(x.CreateDate),
      `${x.MaxSessionDuration} s`, enabledText(x),
      h("button", { type: "button", class: "small danger", "data-role-delete": x.RoleName, "aria-label": "Delete role " + x.RoleName,
        onclick: () => confirm(`Delete role ${x.RoleName}? Its policies must be removed first.`) &&
          iamChange("roles-msg", roles, () => iam("DeleteRole", { RoleName: x.RoleName }), `Role ${x.RoleName} deleted.`) }, "Delete"),
    ])),
    msgLine("roles-msg"),
    h("h2", {}, "Create a role"), form, msgLine("create-role-msg"),
  );
  iamForm(form, "create-role-msg", roles, async (fd) => {
    const params = { RoleName: String(fd.get("name")).trim(), AssumeRolePolicyDocument: String(fd.get("document")) };
    const d = String(fd.get("description")).trim();
    const max = String(fd.get("max")).trim();
    if (max && !/^\d+$/.test(max)) throw new Error("longest session: give a whole number of seconds, or nothing");
    if (d) params.Description = d;
    if (max) params.MaxSessionDuration = max;
    const made = (await iam("CreateRole", params)).Role;
    return `Role ${made.RoleName} created: it is assumed as ${made.Arn}.`;
  });
}

async function role(enc) {
  const name = decodeURIComponent(enc);
  const view = guardedView();
  const reload = () => role(enc);
  const got = await iamFirst(view, "Role " + name, "#/roles", iam("GetRole", { RoleName: name }));
  if (!got) return;
  const x = got.Role;
  const policiesOf = await holderPolicies("Role", name, reload);
  const state = enabledText(x);
  const trust = policyText(x.AssumeRolePolicyDocument);
  const trustForm = h("form", { id: "update-trust", class: "stack" },
    docField("Trust policy (JSON)", "role-trust-edit", trust),
    h("div", {}, h("button", { type: "submit" }, "Replace trust policy")));
  const del = h("button", { type: "button", id: "delete-role", class: "danger", onclick: async () => {
    if (!confirm(`Delete role ${name}? Its policies must be removed first.`)) return;
    try {
      await iam("DeleteRole", { RoleName: name });
      location.hash = "#/roles";
    } catch (e) { say("role-msg", message(e.message, "error")); }
  } }, "Delete role");
  view(
    h("h1", {}, "Role " + name), iamNav("#/roles"),
    h("dl", { class: "facts" },
      [["ARN", h("code", { id: "role-arn" }, x.Arn)], ["Id", h("code", {}, x.RoleId)], ["Path", x.Path],
        ["Description", x.Description || "none"], ["Created", when(x.CreateDate)],
        ["Longest session", `${x.MaxSessionDuration} s`], ["Enabled", state]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v)])),
    h("div", { class: "actions" }, switchButtons("Role", name, state, "role-msg", reload), del),
    msgLine("role-msg"),
    h("section", { id: "trust" }, h("h2", {}, "Trust policy"), msgLine("trust-msg"), trustForm),
    policiesOf,
  );
  iamForm(trustForm, "trust-msg", reload, async (fd) => {
    await iam("UpdateAssumeRolePolicy", { RoleName: name, PolicyDocument: String(fd.get("document")) });
    return "Trust policy replaced.";
  });
}

// ---- OpenID Connect providers ----

async function providers() {
  const view = guardedView();
  const r = await iamFirst(view, "OpenID Connect providers", "#/oidc-providers", iam("ListOpenIDConnectProviders"));
  if (!r) return;
  const list = await Promise.all((r.OpenIDConnectProviderList || []).map(async (x) =>
    Object.assign({ Arn: x.Arn }, await iam("GetOpenIDConnectProvider", { OpenIDConnectProviderArn: x.Arn }))));
  const form = h("form", { id: "create-provider", class: "inline" },
    field("Issuer URL (https; the tokens' iss)", h("input", { name: "url", id: "provider-url", required: true, autocomplete: "off" })),
    field("Client ids (the tokens' aud; space-separated)", h("input", { name: "clients", id: "provider-clients", required: true })),
    h("button", { type: "submit" }, "Add provider"));
  view(
    h("h1", {}, "OpenID Connect providers"), iamNav("#/oidc-providers"),
    h("p", {}, "The holders of a token of a provider get temporary credentials for a role whose trust policy names the " +
      "provider's ARN (STS AssumeRoleWithWebIdentity). The provider's signing keys are found by OpenID Connect discovery."),
    form, msgLine("providers-msg"),
    table("OpenID Connect providers", ["Provider ARN", "Issuer URL", "Client ids", "Created", ""], list.map((x) => [
      h("code", { "data-provider": x.Arn }, x.Arn), h("code", {}, x.Url), (x.ClientIDList || []).join(", "), when(x.CreateDate),
      h("button", { type: "button", class: "small danger", "data-provider-delete": x.Arn, "aria-label": "Delete provider " + x.Url,
        onclick: () => confirm(`Delete provider ${x.Url}? Its tokens are refused from then on.`) &&
          iamChange("providers-msg", providers, () => iam("DeleteOpenIDConnectProvider", { OpenIDConnectProviderArn: x.Arn }),
            `Provider ${x.Url} deleted.`) }, "Delete"),
    ])),
  );
  iamForm(form, "providers-msg", providers, async (fd) => {
    const params = { Url: String(fd.get("url")).trim() };
    words(fd.get("clients")).forEach((c, i) => { params[`ClientIDList.member.${i + 1}`] = c; });
    const made = await iam("CreateOpenIDConnectProvider", params);
    return `Provider added: trust policies name it ${made.OpenIDConnectProviderArn}.`;
  });
}

// ---- Routing ----

const routes = [
  [/^#\/cluster$/, cluster, "nav-cluster"],
  [/^#\/buckets(?:\/(\d+))?$/, buckets, "nav-buckets"],
  [/^#\/bucket\/([0-9a-f]{64})$/, bucket, "nav-buckets"],
  [/^#\/objects\/([0-9a-f]{64})$/, objects, "nav-buckets"],
  [/^#\/keys$/, keys, "nav-keys"],
  [/^#\/key\/(GK[0-9a-f]+)$/, key, "nav-keys"],
  [/^#\/topics$/, topics, "nav-topics"],
  [/^#\/topic\/([A-Za-z0-9_-]{1,256})$/, topic, "nav-topics"],
  [/^#\/remotes$/, remotes, "nav-remotes"],
  [/^#\/remote\/([A-Za-z0-9_-]{1,64})$/, remote, "nav-remotes"],
  [/^#\/activity$/, activity, "nav-activity"],
  [/^#\/users$/, users, "nav-iam"],
  [/^#\/user\/([^/]+)$/, user, "nav-iam"],
  [/^#\/groups$/, groups, "nav-iam"],
  [/^#\/group\/([^/]+)$/, group, "nav-iam"],
  [/^#\/policies$/, policies, "nav-iam"],
  [/^#\/policy\/([^/]+)$/, policy, "nav-iam"],
  [/^#\/roles$/, roles, "nav-iam"],
  [/^#\/role\/([^/]+)$/, role, "nav-iam"],
  [/^#\/oidc-providers$/, providers, "nav-iam"],
];

async function route() {
  if (token === null) return login();
  const hash = location.hash || "#/cluster";
  for (const a of document.querySelectorAll("nav a")) a.removeAttribute("aria-current");
  for (const [re, page, nav] of routes) {
    const m = re.exec(hash);
    if (!m) continue;
    document.getElementById(nav).setAttribute("aria-current", "page");
    const seq = ++routeSeq;
    render(message("Loading…"));
    health();
    try {
      await page(...m.slice(1));
      if (seq !== routeSeq) return;
      document.body.dataset.page = nav.slice(4);
      document.getElementById("view").focus({ preventScroll: true });
      window.scrollTo(0, 0);
    } catch (e) {
      // A token that is no longer valid logs out; one refused this page
      // by its scope stays, and the page says so.
      if (e instanceof ApiError && e.status === 403 && !outOfScope(e)) return login(e.message);
      if (seq === routeSeq) render(message(e.message, "error"));
    }
    return;
  }
  location.hash = "#/cluster";
}

window.addEventListener("hashchange", route);
document.getElementById("logout").addEventListener("click", () => {
  token = null;
  location.hash = "#/login";
  login();
});
route();
