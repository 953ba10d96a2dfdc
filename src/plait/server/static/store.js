// The dev page's Store and Memory views. Store: the caller's items of the Agent Protocol's
// store (`/store…`, DESIGN §14) — its namespaces, the items under one (a query keeps those
// sharing a word), an item written or deleted. Memory: the caller's long-term memories that
// match a query (GET /v1/memory, read only: the memory services the served agents recall
// from). It uses api.js's helpers. Server text is only set as text.
"use strict";

// A namespace typed as "a/b" or "a.b": its labels.
function labels(text) {
  return text
    .split(/[/.]/)
    .map((label) => label.trim())
    .filter(Boolean);
}

function storeSaid(text) {
  $("store-status").textContent = text;
}

async function loadNamespaces() {
  try {
    const found = await sendJSON("POST", "/store/namespaces", { limit: 200 });
    const items = found.namespaces.map((namespace) => {
      const pick = button(namespace.join("/"), "namespace", () => {
        $("store-prefix").value = namespace.join("/");
        searchStore();
      });
      return el("li", "", pick);
    });
    $("store-namespaces").replaceChildren(...items);
    if (!items.length) $("store-namespaces").append(el("li", "muted", "no item is stored"));
  } catch (error) {
    storeSaid(error.message);
  }
}

function storeRow(item) {
  const row = el(
    "tr",
    "",
    el("td", "", item.namespace.join("/")),
    el("td", "", item.key),
    el("td", "", el("pre", "", show(item.value))),
    el("td", "muted", when(item.updated_at)),
    el("td", "", button("Delete", "delete", () => deleteItem(item))),
  );
  row.dataset.key = item.key;
  row.dataset.namespace = item.namespace.join("/");
  return row;
}

async function searchStore(event) {
  if (event) event.preventDefault();
  const body = { namespace_prefix: labels($("store-prefix").value), limit: 100 };
  const query = $("store-query").value.trim();
  if (query) body.query = query;
  try {
    const found = await sendJSON("POST", "/store/items/search", body);
    $("store-items").replaceChildren(...found.items.map(storeRow));
    storeSaid(count(found.items.length, "item"));
  } catch (error) {
    storeSaid(error.message);
  }
}

async function putItem(event) {
  event.preventDefault();
  const typed = parseTyped($("store-value").value, "The value");
  if (!typed.ok) return storeSaid(typed.message);
  const body = { namespace: labels($("store-namespace").value), key: $("store-key").value.trim(), value: typed.value };
  try {
    await sendJSON("PUT", "/store/items", body);
    storeSaid(`${body.namespace.join("/")}/${body.key} written.`);
    $("store-prefix").value = body.namespace.join("/");
    await Promise.all([loadNamespaces(), searchStore()]);
  } catch (error) {
    storeSaid(error.message);
  }
}

async function deleteItem(item) {
  try {
    await sendJSON("DELETE", "/store/items", { namespace: item.namespace, key: item.key });
    storeSaid(`${item.namespace.join("/")}/${item.key} deleted.`);
    await Promise.all([loadNamespaces(), searchStore()]);
  } catch (error) {
    storeSaid(error.message);
  }
}

// ---- memory --------------------------------------------------------------------------

async function searchMemory(event) {
  event.preventDefault();
  const query = $("memory-query").value.trim();
  if (!query) return;
  try {
    const found = await getJSON(`/v1/memory?query=${encodeURIComponent(query)}&k=20`);
    if (!found.enabled) {
      $("memory-status").textContent = "No served agent recalls memories (plait.memory.RecallTool).";
    } else {
      const n = found.items.length;
      $("memory-status").textContent = `${n} ${n === 1 ? "memory" : "memories"} of user ${found.user}`;
    }
    const items = found.items.map((item) => {
      const meta = item.metadata ? el("code", "muted", JSON.stringify(item.metadata)) : null;
      const row = el("li", "memory", el("div", "text", item.text), meta, el("small", "muted", `score ${item.score.toFixed(2)} · ${item.id}`));
      row.dataset.memory = item.id;
      return row;
    });
    $("memory-items").replaceChildren(...items);
  } catch (error) {
    $("memory-status").textContent = error.message;
  }
}

function storeStart() {
  $("store-search").addEventListener("submit", searchStore);
  $("store-put").addEventListener("submit", putItem);
  $("memory-form").addEventListener("submit", searchMemory);
}

// The view was opened: read what it shows.
function storeOpened() {
  return Promise.all([loadNamespaces(), searchStore()]);
}
