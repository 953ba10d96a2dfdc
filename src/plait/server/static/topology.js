// The dev page's picture of the selected agent (GET /v1/agents/{name}/topology): an inline SVG
// with teams, members, sub-agents, agent tools, workflow steps and graph nodes as boxes, each
// under what holds it, and transfers and graph edges as dashed arrows. The agent of the event
// in view is outlined, and the one whose tool paused the run is marked.
// It uses app.js's helpers. Server text is only set as text (SVG text nodes).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const BOX_W = 132;
const BOX_H = 40;
const SLOT = 150;
const LEVEL = 78;
const PAD = 12;

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children) if (child != null) node.append(child);
  return node;
}

// A graph's nodes in the order its flow runs: `__start__`, each node the first time an edge
// reaches it, the nodes no edge reaches, then `__end__`.
function flowOrder(children, edges) {
  const ids = new Set(children.map((child) => child.id));
  const next = new Map();
  for (const edge of edges) {
    if (edge.kind !== "graph" || !ids.has(edge.source) || !ids.has(edge.target)) continue;
    if (!next.has(edge.source)) next.set(edge.source, []);
    next.get(edge.source).push(edge.target);
  }
  const end = children.find((child) => child.kind === "end");
  const start = children.find((child) => child.kind === "start");
  const seen = [];
  const queue = start ? [start.id] : [];
  while (queue.length) {
    const id = queue.shift();
    if (seen.includes(id) || (end && id === end.id)) continue;
    seen.push(id);
    queue.push(...(next.get(id) || []));
  }
  const rest = children.filter((child) => !seen.includes(child.id) && child !== end);
  const byId = new Map(children.map((child) => [child.id, child]));
  return [...seen.map((id) => byId.get(id)), ...rest, ...(end ? [end] : [])];
}

// The edges a graph does not draw but has: a node no edge leaves ends the graph.
function endingEdges(byId, edges) {
  const leaving = new Set(edges.filter((edge) => edge.kind === "graph").map((edge) => edge.source));
  const found = [];
  for (const end of byId.values()) {
    if (end.kind !== "end") continue;
    for (const node of byId.values()) {
      const inGraph = node.parent === end.parent && node.kind !== "start" && node.kind !== "end";
      if (inGraph && !leaving.has(node.id)) {
        found.push({ source: node.id, target: end.id, kind: "graph", label: "", implicit: true });
      }
    }
  }
  return found;
}

// Place each node: leaves side by side, a parent centred over its children (a graph's in
// the order of its flow).
function layoutTopology(topology) {
  const byId = new Map(topology.nodes.map((node) => [node.id, { ...node, children: [] }]));
  const roots = [];
  for (const node of byId.values()) {
    const parent = node.parent && byId.get(node.parent);
    if (parent) parent.children.push(node);
    else roots.push(node);
  }
  for (const node of byId.values()) {
    if (node.kind === "graph") node.children = flowOrder(node.children, topology.edges);
  }
  let slot = 0;
  let deepest = 0;
  const place = (node, depth) => {
    node.depth = depth;
    deepest = Math.max(deepest, depth);
    if (!node.children.length) node.x = slot++;
    else {
      node.children.forEach((child) => place(child, depth + 1));
      node.x = (node.children[0].x + node.children[node.children.length - 1].x) / 2;
    }
    node.left = PAD + node.x * SLOT + (SLOT - BOX_W) / 2;
    node.top = PAD + depth * LEVEL;
  };
  roots.forEach((root) => place(root, 0));
  return { byId, width: Math.max(slot, 1) * SLOT + 2 * PAD, height: (deepest + 1) * LEVEL + PAD };
}

function nodeBox(node) {
  const tools = node.tools.length ? "tools: " + node.tools.join(", ") : node.kind;
  const group = svg(
    "g",
    { class: `node kind-${node.kind}`, "data-node": node.id, "data-name": node.name },
    svg("title", {}, node.description ? `${node.name}: ${node.description}` : node.name),
    svg("rect", { x: node.left, y: node.top, width: BOX_W, height: BOX_H, rx: 7 }),
    svg("text", { x: node.left + BOX_W / 2, y: node.top + 16, class: "name" }, node.name),
    svg("text", { x: node.left + BOX_W / 2, y: node.top + 31, class: "sub" }, tools.slice(0, 26)),
  );
  return group;
}

function edgeLine(edge, from, to, both) {
  const fx = from.left + BOX_W / 2;
  const tx = to.left + BOX_W / 2;
  const kind = `edge ${edge.kind}${edge.implicit ? " implicit" : ""}`;
  const attrs = { class: kind, "data-source": edge.source, "data-target": edge.target };
  if (to.parent === from.id) {
    const line = svg("line", { ...attrs, x1: fx, y1: from.top + BOX_H, x2: tx, y2: to.top });
    const label = edge.label || (edge.kind === "agent_tool" ? "tool" : edge.kind);
    const text = svg("text", { x: (fx + tx) / 2 + 4, y: (from.top + BOX_H + to.top) / 2, class: "edge-label" }, label);
    return [line, text];
  }
  // between siblings (a transfer, a graph edge): a dashed arrow bowing below the boxes
  const y1 = from.top + BOX_H;
  const y2 = to.top + BOX_H;
  const bow = Math.max(y1, y2) + 26;
  const d = `M ${fx} ${y1} C ${fx} ${bow}, ${tx} ${bow}, ${tx} ${y2}`;
  const path = svg("path", { ...attrs, d, "marker-end": "url(#arrow)" });
  if (both) path.setAttribute("marker-start", "url(#arrow)");
  const parts = [path];
  if (edge.label) parts.push(svg("text", { x: (fx + tx) / 2, y: bow - 2, class: "edge-label" }, edge.label));
  return parts;
}

function drawTopology(topology) {
  const { byId, width, height } = layoutTopology(topology);
  const arrow = svg(
    "marker",
    { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
    svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }),
  );
  const picture = svg("svg", {
    id: "topology-svg",
    viewBox: `0 0 ${width} ${height + 30}`,
    width,
    height: height + 30,
    role: "img",
    "aria-label": `topology of ${topology.root}`,
  });
  picture.append(svg("defs", {}, arrow));
  const edges = [...topology.edges, ...endingEdges(byId, topology.edges)];
  const pairs = new Set(edges.map((edge) => edge.source + "\n" + edge.target));
  const drawn = new Set();
  for (const edge of edges) {
    const from = byId.get(edge.source);
    const to = byId.get(edge.target);
    if (!from || !to || drawn.has(edge.target + "\n" + edge.source)) continue;
    drawn.add(edge.source + "\n" + edge.target);
    const both = edge.kind === "transfer" && pairs.has(edge.target + "\n" + edge.source);
    picture.append(...edgeLine(edge, from, to, both));
  }
  for (const node of byId.values()) picture.append(nodeBox(node));
  return picture;
}

async function loadTopology(name) {
  if (!name) return;
  try {
    const topology = await getJSON(`/v1/agents/${encodeURIComponent(name)}/topology`);
    if ($("agent").value !== name) return; // another agent was picked meanwhile
    $("topology-view").replaceChildren(drawTopology(topology));
    $("topology").hidden = false;
    $("topology-count").textContent = count(topology.nodes.length, "node");
  } catch (_) {
    $("topology").hidden = true; // the picture is extra: the page stands without it
  }
}

// The node an event's run path names: the deepest box of that agent's name.
function nodeOf(name) {
  if (!name) return null;
  const found = $("topology-view").querySelectorAll(`g.node[data-name="${CSS.escape(name)}"]`);
  return found.length ? found[found.length - 1] : null;
}

// Outline the agent at the end of `runPath` (null: keep it); mark `asker` as paused.
function markTopology(runPath, asker) {
  const view = $("topology-view");
  if (runPath === null && asker === null) {
    for (const node of view.querySelectorAll("g.node")) node.classList.remove("active", "paused");
    return;
  }
  if (runPath) {
    const active = nodeOf(runPath[runPath.length - 1]);
    for (const node of view.querySelectorAll("g.node.active")) node.classList.remove("active");
    if (active) active.classList.add("active");
  }
  if (asker) {
    const paused = nodeOf(asker);
    if (paused) paused.classList.add("paused");
  }
}

// Fold the picture away: the run's events get the room (the summary opens it again).
function foldTopology() {
  $("topology").open = false;
}
