// The chat page, by hand: tools and next steps as buttons, every answer shown as text.
// Plain ES module, no build step. Nothing an insurer sends is ever inserted as HTML.

const german = (navigator.language || "").toLowerCase().startsWith("de");
const TEXT = german
  ? { title: "Die MCP-Server der Versicherer", send: "Aufrufen", next: "Folgeschritte",
      hand: "Folgeschritte von Hand gehen: ein Werkzeug wählen oder einen Folgeschritt einer Antwort.",
      premium: "Prämie", error: "Fehler", body: "Anfragekörper (JSON)",
      assumed: "Noch auf dem Standard des Versicherers", keep: "Dieses Gespräch behalten",
      download: "Herunterladen (JSONL-Protokoll)", task: "Die Aufgabe, in Worten",
      expected: "Erwartete Prämie", save: "Als Szenario speichern (YAML)" }
  : { title: "The insurers' MCP servers", send: "Call", next: "Next steps",
      hand: "Follow the next steps by hand: choose a tool, or a next step of an answer.",
      premium: "Premium", error: "Error", body: "body (JSON)",
      assumed: "Still at the insurer's default", keep: "Keep this conversation",
      download: "Download it (JSONL protocol)", task: "The task, in words",
      expected: "Expected premium", save: "Save as a scenario (YAML)" };
document.documentElement.lang = german ? "de" : "en";
for (const node of document.querySelectorAll("[data-text]")) node.textContent = TEXT[node.dataset.text];

const state = { conversation: null, servers: {}, current: null };

function element(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text) node.textContent = text;
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    ...options,
  });
  return { status: response.status, body: response.status === 204 ? null : await response.json() };
}

function openForm(server, tool, argumentsGiven = {}, body = undefined) {
  const spec = state.servers[server].tools.find((t) => t.name === tool);
  if (!spec) return;
  state.current = { server, tool };
  const form = document.getElementById("call");
  form.hidden = false;
  document.getElementById("call-title").textContent = `${state.servers[server].displayName} · ${tool}`;
  document.getElementById("call-description").textContent = spec.description || "";
  const fields = document.getElementById("fields");
  fields.replaceChildren();
  const properties = (spec.inputSchema && spec.inputSchema.properties) || {};
  for (const [name, schema] of Object.entries(properties)) {
    if (name === "full") continue;
    const id = `field-${name}`;
    fields.append(element("label", { for: id }, name === "body" ? TEXT.body : name));
    let input;
    if (name === "body") {
      input = element("textarea", { id, name, spellcheck: "false" });
      input.value = body === undefined ? "" : JSON.stringify(body, null, 2);
    } else {
      input = element("input", { id, name, type: schema.type === "integer" ? "number" : "text" });
      if (argumentsGiven[name] !== undefined) input.value = argumentsGiven[name];
    }
    fields.append(input);
  }
  const first = fields.querySelector("textarea, input");
  if (first) first.focus();
}

function collect() {
  const argumentsOut = {};
  for (const input of document.querySelectorAll("#fields input, #fields textarea")) {
    if (input.value.trim() === "") continue;
    if (input.name === "body") argumentsOut.body = JSON.parse(input.value);
    else if (input.type === "number") argumentsOut[input.name] = Number(input.value);
    else argumentsOut[input.name] = input.value;
  }
  return argumentsOut;
}

function show(event) {
  const structured = (event["mcp.tool.result"] || {}).structuredContent || {};
  const article = element("article", { class: event.is_error ? "error" : "answer" });
  article.append(element("h3", {}, `${event["mcp.server"]} · ${event["gen_ai.tool.name"]}` +
    (event.is_error ? ` · ${TEXT.error}` : "")));
  if (structured.premium && !event.is_error) {
    const p = structured.premium;
    const amount = new Intl.NumberFormat(german ? "de-DE" : "en-GB",
      { style: "currency", currency: p.currency || "EUR" }).format(p.gross);
    article.append(element("p", { class: "premium" }, `${TEXT.premium}: ${amount} (${p.period})`));
  }
  if (structured.defaults && structured.defaults.length) {
    const named = structured.defaults.map((d) => `${d.label} = ${d.value}`).join("; ");
    article.append(element("p", { class: "defaults" }, `${TEXT.assumed}: ${named}`));
  }
  article.append(element("pre", {}, event.text));  // the exact text a model sees, as text
  const steps = structured.nextSteps || [];
  if (steps.length) {
    const nav = element("div", { class: "steps", role: "group", "aria-label": TEXT.next });
    nav.append(element("h4", {}, TEXT.next));
    for (const step of steps) {
      const label = `${step.tool} · ${step.label || step.target}`;
      const button = element("button", { type: "button", "data-tool": step.tool }, label);
      button.addEventListener("click", () => openForm(event["mcp.server"], step.tool, step.arguments || {}, step.body));
      nav.append(button);
    }
    article.append(nav);
  }
  document.getElementById("log").prepend(article);
}

document.getElementById("call").addEventListener("submit", async (submitted) => {
  submitted.preventDefault();
  const { server, tool } = state.current;
  let argumentsOut;
  try {
    argumentsOut = collect();
  } catch (error) {
    show({ "mcp.server": server, "gen_ai.tool.name": tool, is_error: true, text: String(error) });
    return;
  }
  const answer = await api(`/chat/api/conversations/${state.conversation}/calls`, {
    method: "POST", body: JSON.stringify({ server, tool, arguments: argumentsOut }),
  });
  if (answer.status === 200) show(answer.body);
  else show({ "mcp.server": server, "gen_ai.tool.name": tool, is_error: true, text: answer.body.detail });
});

document.getElementById("save").addEventListener("submit", async (submitted) => {
  submitted.preventDefault();
  const premium = document.getElementById("expected").value;
  const response = await fetch(`/chat/api/conversations/${state.conversation}/scenario`, {
    method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ task: document.getElementById("task").value,
                           premium: premium === "" ? null : Number(premium) }),
  });
  if (!response.ok) {
    const problem = await response.json();
    show({ "mcp.server": "", "gen_ai.tool.name": TEXT.save, is_error: true, text: problem.detail });
    return;
  }
  const link = element("a", { download: "scenario.yaml" });
  link.href = URL.createObjectURL(new Blob([await response.text()], { type: "application/yaml" }));
  link.click();
});

async function main() {
  const started = await api("/chat/api/conversations", { method: "POST", body: "{}" });
  state.conversation = started.body.id;
  document.body.dataset.conversation = state.conversation;
  document.getElementById("download").href =
    `/chat/api/conversations/${state.conversation}/protocol.jsonl`;
  const listed = await api("/chat/api/servers");
  const nav = document.getElementById("servers");
  for (const server of listed.body.servers) {
    state.servers[server.name] = server;
    const section = element("section", { "data-server": server.name });
    section.append(element("h2", {}, server.displayName));
    for (const tool of server.tools) {
      const button = element("button", { type: "button", "data-tool": tool.name }, tool.name);
      button.title = tool.title || "";
      button.addEventListener("click", () => openForm(server.name, tool.name));
      section.append(button);
    }
    nav.append(section);
  }
  document.body.dataset.ready = "true";
}

main();
