// The chat page: a model works on the user's task with the insurers' MCP tools (streamed as
// server-sent events), or a person follows the next steps by hand. Plain ES module, no build step.
// Nothing an insurer or a model sends is ever inserted as HTML: every text goes in as text.

const german = (navigator.language || "").toLowerCase().startsWith("de");
const TEXT = german
  ? { title: "Die MCP-Server der Versicherer", send: "Aufrufen", next: "Folgeschritte",
      hand: "Folgeschritte von Hand gehen: ein Werkzeug wählen oder einen Folgeschritt einer Antwort.",
      chat: "Eine Aufgabe an das Modell geben, oder die Folgeschritte von Hand gehen.",
      noModel: "Kein Modell eingerichtet (omds-ld serve --chat-model …): die Folgeschritte von Hand gehen.",
      premium: "Prämie", error: "Fehler", body: "Anfragekörper (JSON)",
      orJson: "oder der ganze Anfragekörper als JSON (geht den Feldern vor)",
      advanced: "Erweitert (technische Felder)",
      start: "Hier beginnen: die Produkte", allTools: "Alle Werkzeuge ({n})",
      startHint: "Eine Aufgabe beginnt mit den Produkten des Versicherers; jede Antwort nennt die Folgeschritte.",
      priced: "Das Angebot wurde mit Vertragsbeginn {date} berechnet; der Antrag beginnt an dem Tag, den Sie hier angeben (die Bestätigungsseite zeigt beide).",
      oneOf: "eine der Formen",
      assumed: "Noch auf dem Standard des Versicherers", keep: "Dieses Gespräch behalten",
      download: "Herunterladen (JSONL-Protokoll)", task: "Die Aufgabe, in Worten",
      expected: "Erwartete Prämie", save: "Als Szenario speichern (YAML)",
      grade: "Dieses Gespräch bewerten", message: "Ihre Aufgabe für das Modell", ask: "Senden",
      working: "Das Modell arbeitet …", you: "Sie", answer: "Antwort", asks: "ruft auf",
      details: "Argumente, Antwort, Folgeschritte", full: "Ganze Antwort (JSON-LD)", calls: "Modellaufrufe",
      tokensIn: "Token ein", tokensOut: "aus", passed: "bestanden", failed: "nicht bestanden",
      stopped: "Abgebrochen", login: "Als Makler anmelden", logout: "Abmelden",
      delete: "Dieses Gespräch löschen",
      personal: "Personenbezogene Daten in diesem Gespräch behalten (sonst verdeckt, auch im Download; gelöscht nach der Aufbewahrungsfrist des Betreibers)",
      broker: "Angemeldet als", mustLogIn: "Die MCP-Server verlangen einen Makler: bitte anmelden.",
      confirmTitle: "Bitte bestätigen: das bindet den Kunden",
      openPage: "Bestätigungsseite öffnen (als Makler anmelden, prüfen, antworten)",
      onPage: "Nur Sie beantworten das, angemeldet als der Makler, für den das Modell handelt: auf der Bestätigungsseite.",
      statedOnPage: "Die Zustimmung des Kunden geben Sie auf der Bestätigungsseite an: wer, wie und wann.",
      answered: "Ich habe auf der Seite geantwortet: weiter",
      confirmed: "Sie haben bestätigt", declined: "Sie haben abgelehnt",
      waits: "wartet auf Ihre Bestätigung", application: "Antrag", policy: "Polizzennummer",
      states: { submitted: "eingereicht", accepted: "angenommen", referred: "in Risikoprüfung",
                declined: "abgelehnt", "counter-offer": "Gegenangebot", withdrawn: "zurückgezogen" },
      modelText: "Was das Modell liest (technisch, Englisch)", caseWord: "Geschäftsfall",
      caseStates: { draft: "Entwurf", calculated: "berechnet", offered: "angeboten",
                    applied: "beantragt" },
      draft: "Entwurf", included: "eingeschlossen", excluded: "nicht eingeschlossen",
      riskObject: "Risikoobjekt", riskObjectsNone: "Noch kein Risikoobjekt",
      conforms: "Vollständig und gültig", violations: "Noch nicht vollständig",
      offer: "Angebot", validUntil: "gültig bis", products: "Produkte",
      problem: "Nicht ausgeführt" }
  : { title: "The insurers' MCP servers", send: "Call", next: "Next steps",
      hand: "Follow the next steps by hand: choose a tool, or a next step of an answer.",
      chat: "Give the model a task, or follow the next steps by hand.",
      noModel: "No model configured (omds-ld serve --chat-model …): follow the next steps by hand.",
      premium: "Premium", error: "Error", body: "body (JSON)",
      orJson: "or the whole body as JSON (it goes before the fields)",
      advanced: "Advanced (technical fields)",
      start: "Start here: the products", allTools: "All tools ({n})",
      startHint: "A task begins with the insurer's products; every answer names the next steps.",
      priced: "The offer was priced from a contract start of {date}; the application starts on the day you give here (the confirmation page shows both).",
      oneOf: "one of the shapes",
      assumed: "Still at the insurer's default", keep: "Keep this conversation",
      download: "Download it (JSONL protocol)", task: "The task, in words",
      expected: "Expected premium", save: "Save as a scenario (YAML)",
      grade: "Grade this conversation", message: "Your task for the model", ask: "Send",
      working: "The model is working…", you: "You", answer: "Answer", asks: "calls",
      details: "Arguments, answer, next steps", full: "Full answer (JSON-LD)", calls: "model calls",
      tokensIn: "tokens in", tokensOut: "out", passed: "passed", failed: "not passed",
      stopped: "Stopped", login: "Log in as a broker", logout: "Log out",
      delete: "Delete this conversation",
      personal: "Keep the personal data in this conversation (else masked, in the download too; deleted after the operator's retention)",
      broker: "Logged in as", mustLogIn: "The MCP servers want a broker: please log in.",
      confirmTitle: "Please confirm: this binds the customer",
      openPage: "Open the confirmation page (log in as the broker, review, answer)",
      onPage: "Only you answer this, logged in as the broker the model acts for: on the confirmation page.",
      statedOnPage: "You state the customer's consent on the confirmation page: who, how and when.",
      answered: "I answered on the page: go on",
      confirmed: "You confirmed", declined: "You declined",
      waits: "waits for your confirmation", application: "Application", policy: "policy number",
      states: { submitted: "submitted", accepted: "accepted", referred: "referred to underwriting",
                declined: "declined", "counter-offer": "counter-offer", withdrawn: "withdrawn" },
      modelText: "What the model reads (technical)", caseWord: "Business case",
      caseStates: { draft: "draft", calculated: "calculated", offered: "offered",
                    applied: "applied for" },
      draft: "Draft", included: "included", excluded: "not included",
      riskObject: "Risk object", riskObjectsNone: "No risk object yet",
      conforms: "Complete and valid", violations: "Not complete yet",
      offer: "Offer", validUntil: "valid until", products: "Products",
      problem: "Not done" };
document.documentElement.lang = german ? "de" : "en";
// a premium's period in words ("per year" / "pro Jahr"), as the MCP server gives it
const per = (premium) => (premium.per ? premium.per[german ? "de" : "en"] : `(${premium.period})`);
for (const node of document.querySelectorAll("[data-text]")) node.textContent = TEXT[node.dataset.text];

const state = { conversation: null, servers: {}, current: null, model: null, shown: new Set(),
                usage: { calls: 0, input: 0, output: 0, cost: 0 }, turn: [],
                // every shape with its fields an answer of this conversation showed, by server
                // and IRI: a session is shown a shape's fields once, the next case's forms too
                shapes: {} };
// the whole structured answer of a tool result (its _meta); structuredContent is its summary
const answerOf = (result) =>
  ((result || {})._meta || {})["omds-ld/answer"] || (result || {}).structuredContent || {};
const money = (amount, currency) => new Intl.NumberFormat(german ? "de-DE" : "en-GB",
  { style: "currency", currency: currency || "EUR" }).format(amount);

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

const localName = (iri) => iri.split(/[#/]/).pop();

// a shape as a person calls it: "PersonShape" is a person's form
const shapeWord = (iri) => localName(iri).replace(/Shape$/, "").replace(/([a-z])([A-Z])/g, "$1 $2");

function shapeSet(shape, shapes, prefill, field = null, variant = null, title = null) {
  // the body a step expects, as a form of its shape's fields (the answer lists them); a field
  // whose value is a node of another shape the step expects (bc:shape) is a form of its own,
  // and where it may be a node of one of several (the policyholder: a person or a company), a
  // choice of them shows one form at a time, and only the one shown is sent
  const set = element("fieldset", { class: "shape", "data-class": shape.targetClass || "" });
  if (field) set.dataset.field = field;
  set.append(element("legend", {}, title || shapeWord(shape.iri)));
  for (const one of shape.fields) {
    const kinds = one.shapes || [];
    if (kinds.length > 1) {
      set.append(...shapeChoice(one.name, kinds, shapes, prefill));
      continue;
    }
    if (kinds.length && kinds[0] === prefill["@stated"]) {
      // the part the person states when they confirm (the consent): no field of it here
      set.append(element("p", { class: "stated" }, TEXT.statedOnPage));
      continue;
    }
    const nested = shapes.find((x) => x.iri === kinds[0]);
    if (nested) {
      const part = (one.names && one.names[german ? "de" : "en"]) || one.label;
      set.append(shapeSet(nested, shapes, prefill, one.name, null, part));
      continue;
    }
    const id = `shape-${field ? `${field}${variant ? `@${variant}` : ""}/` : ""}${one.name}`;
    // the field in the person's words; its bounds as a hint, not as schema
    const bounds = one.min !== undefined && one.max !== undefined ? `${one.min}–${one.max}` : "";
    const named = (one.names && one.names[german ? "de" : "en"]) || one.label || one.name;
    set.append(element("label", { for: id }, `${named}${one.required ? " *" : ""}` +
      (bounds ? ` (${bounds})` : "")));
    let input;
    if (Array.isArray(one.in)) {
      input = element("select", { id, "data-field": one.name });
      input.append(element("option", { value: "" }, "—"));
      for (const value of one.in) {
        const meaning = one.labels && one.labels[String(value)];
        input.append(element("option", { value: JSON.stringify(value) }, meaning ? `${value} (${meaning})` : String(value)));
      }
    } else {
      const numeric = /(integer|decimal|double|float)$/.test(one.type || "");
      const kind = numeric ? "number" : /:date$/.test(one.type || "") ? "date" : "text";
      input = element("input", { id, "data-field": one.name, type: kind, "data-numeric": numeric ? "1" : "" });
    }
    if (prefill[one.name] !== undefined) {  // the answer's own data: the offer's digest, today
      input.value = prefill[one.name];
      input.dataset.prefilled = String(prefill[one.name]);
    }
    set.append(input);
    if (one.name === "bc:startDate" && prefill["@priced"]) {  // two starts: said, not hidden
      set.append(element("p", { class: "priced" }, TEXT.priced.replace("{date}", prefill["@priced"])));
    }
  }
  return set;
}

function shapeChoice(field, named, shapes, prefill) {
  // which of its shapes a node field takes: the choice, and a form per shape, the first shown
  // (those the answer has first). A shape the answer only named is read by hand (readShape)
  // when chosen
  const id = `choice-${field}`;
  const has = (iri) => shapes.some((x) => x.iri === iri && x.fields);
  const kinds = [...named.filter(has), ...named.filter((iri) => !has(iri))];
  const select = element("select", { id });
  const forms = kinds.map((iri, i) => {
    select.append(element("option", { value: String(i) }, shapeWord(iri)));
    const shape = shapes.find((x) => x.iri === iri);
    const variant = i ? localName(iri) : null;
    const form = shape ? shapeSet(shape, shapes, prefill, field, variant)
      : element("fieldset", { class: "shape", "data-field": field, "data-unread": iri });
    form.hidden = i > 0;
    return form;
  });
  select.addEventListener("change", async () => {
    const i = Number(select.value);
    if (forms[i].dataset.unread) {
      const read = await shapeByHand(forms[i].dataset.unread);
      if (!read) return;
      const form = shapeSet(read, [read, ...shapes], prefill, field, localName(read.iri));
      forms[i].replaceWith(form);
      forms[i] = form;
    }
    forms.forEach((form, j) => { form.hidden = j !== i; });
  });
  return [element("label", { for: id }, `${field}: ${TEXT.oneOf}`), select, ...forms];
}

async function shapeByHand(iri) {
  // readShape by hand at the server of the form open now, shown in the log like any call
  const server = state.current.server;
  const answer = await api(`/chat/api/conversations/${state.conversation}/calls`, {
    method: "POST",
    body: JSON.stringify({ server, tool: "readShape", arguments: { shapeId: localName(iri) } }),
  });
  if (answer.status !== 200) return null;
  render(answer.body);
  const shape = answerOf(answer.body["mcp.tool.result"]).shape;
  return shape && shape.fields && localName(shape.iri) === localName(iri) ? shape : null;
}

function prefilled(structured, step) {
  // what the answer that offered a step knows for its body: the insurer's today; and the part
  // the person states on the confirmation page (no form of it here)
  const today = structured.insurerToday || new Date().toISOString().slice(0, 10);
  const priced = (structured.offer || {}).contractStart;  // the start the premium was priced from
  return { "bc:startDate": today, "@stated": step.statedByPerson, "@priced": priced };
}

// where a task begins at any insurer of the norm: its products (each answer's next steps go on)
const ENTRY = ["listProducts"];

// arguments a person never needs to see: the retry key, the memory of a client without a session
const TECHNICAL = new Set(["idempotencyKey", "seen"]);

function openForm(server, tool, argumentsGiven = {}, body = undefined, shapes = [], prefill = {}) {
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
  // what a person fills in first; the technical fields (the retry key, what a client without a
  // session was shown, the body as JSON) folded away under "advanced"
  const advanced = element("details", { class: "advanced" });
  advanced.append(element("summary", {}, TEXT.advanced));
  for (const [name, schema] of Object.entries(properties)) {
    if (name === "full") continue;
    const id = `field-${name}`;
    const technical = TECHNICAL.has(name) || (name === "body" && shapes.some((x) => x.fields && x.fields.length) && body === undefined);
    const place = technical ? advanced : fields;
    if (name !== "body") place.append(element("label", { for: id }, name));
    let input;
    if (name === "body") {
      // a body no step gives ready: the form of the shape it fills, JSON as the alternative
      const shape = body === undefined ? shapes.find((x) => x.fields && x.fields.length) : undefined;
      if (shape) fields.append(shapeSet(shape, shapes, prefill));
      place.append(element("label", { for: id }, shape ? TEXT.orJson : TEXT.body));
      input = element("textarea", { id, name, spellcheck: "false" });
      input.value = body === undefined ? "" : JSON.stringify(body, null, 2);
    } else {
      input = element("input", { id, name, type: schema.type === "integer" ? "number" : "text" });
      if (argumentsGiven[name] !== undefined) input.value = argumentsGiven[name];
    }
    place.append(input);
  }
  if (advanced.children.length > 1) fields.append(advanced);
  const first = fields.querySelector("textarea, input");
  if (first) first.focus();
}

function filledIn(set) {
  // a fieldset's values by field; a nested one's as its node (with its class as @type), left
  // out where nothing but what was filled in for the person is in it (the consent: then the
  // person states it when they confirm)
  const out = {};
  let given = false;
  for (const child of set.children) {
    if (child.matches("fieldset.shape")) {
      if (child.hidden) continue;  // a shape not chosen
      const [node, nodeGiven] = filledIn(child);
      if (nodeGiven) {
        out[child.dataset.field] = { "@type": child.dataset.class, ...node };
        given = true;
      }
    } else if (child.dataset.field && child.value.trim() !== "") {
      out[child.dataset.field] = child.tagName === "SELECT" ? JSON.parse(child.value)
        : child.dataset.numeric ? Number(child.value) : child.value;
      if (child.value !== child.dataset.prefilled) given = true;
    }
  }
  return [out, given];
}

function collect() {
  const argumentsOut = {};
  const shape = document.querySelector("#fields > fieldset.shape");
  if (shape) {
    const [filled, given] = filledIn(shape);
    if (given) argumentsOut.body = { "@type": shape.dataset.class, ...filled };
  }
  for (const input of document.querySelectorAll("#fields > input, #fields > textarea, " +
                                                "#fields > details.advanced > :is(input, textarea)")) {
    if (input.value.trim() === "") continue;
    if (input.name === "body") argumentsOut.body = JSON.parse(input.value);
    else if (input.type === "number") argumentsOut[input.name] = Number(input.value);
    else argumentsOut[input.name] = input.value;
  }
  return argumentsOut;
}

async function callByHand(server, tool, argumentsOut) {
  const answer = await api(`/chat/api/conversations/${state.conversation}/calls`, {
    method: "POST", body: JSON.stringify({ server, tool, arguments: argumentsOut }),
  });
  if (answer.status === 200) render(answer.body);
  else render({ "mcp.server": server, "gen_ai.tool.name": tool, is_error: true, text: answer.body.detail });
}

function confirmationArticle(url) {
  // a binding call waits for the person: they log in on its page, review and answer there
  const article = element("article", { class: "confirmation", role: "alertdialog" });
  article.append(element("h3", {}, TEXT.confirmTitle));
  article.append(element("p", {}, TEXT.onPage));
  const link = element("p");
  link.append(element("a", { href: url, target: "_blank", rel: "noopener", class: "page" },
    TEXT.openPage));
  article.append(link);
  const button = element("button", { type: "button", "data-answer": "answered" }, TEXT.answered);
  button.addEventListener("click", async () => {
    button.disabled = true;
    const reply = await api(`/chat/api/conversations/${state.conversation}/confirmations`, {
      method: "POST", body: JSON.stringify({ url, answer: "answered" }),
    });
    if (reply.status === 200) {  // by hand: the call, made again, shows what they answered
      if (!reply.body.confirmation) {
        const problem = (answerOf(reply.body["mcp.tool.result"]).problem || {}).type || "";
        add(element("article", { class: "person" },
          problem.endsWith("/confirmation-declined") ? TEXT.declined : TEXT.confirmed));
      } else button.disabled = false;
      render(reply.body);
    } else if (reply.status !== 202) button.disabled = false;
  });
  article.append(button);
  return article;
}

function add(article) {
  document.getElementById("log").append(article);
  article.scrollIntoView({ block: "nearest" });
}

function showUsage() {
  const u = state.usage;
  if (!u.calls) return;
  const line = document.getElementById("usage");
  line.hidden = false;
  const cost = new Intl.NumberFormat(german ? "de-DE" : "en-GB",
    { style: "currency", currency: "USD", maximumFractionDigits: 4 }).format(u.cost);
  line.textContent = `${state.model ? state.model.name : ""} · ${u.calls} ${TEXT.calls} · ` +
    `${u.input.toLocaleString()} ${TEXT.tokensIn}, ${u.output.toLocaleString()} ${TEXT.tokensOut} · ${cost}`;
}

function toolArticle(event) {
  const structured = answerOf(event["mcp.tool.result"]);
  // a binding call waiting for the person is no error: the person answers it on its page
  const waiting = event.is_error &&
    String((structured.problem || {}).type || "").endsWith("/confirmation-required");
  const failed = event.is_error && !waiting;
  const article = element("article", { class: waiting ? "tool waiting" : failed ? "tool error" : "tool answer" });
  article.append(element("h3", {}, `${event["mcp.server"]} · ${event["gen_ai.tool.name"]}` +
    (waiting ? ` · ${TEXT.waits}` : failed ? ` · ${TEXT.error}` : "")));
  if (structured.application && !event.is_error) {  // what an application came to, first
    const a = structured.application;
    article.append(element("p", { class: "application" }, `${TEXT.application} ${a.applicationId}: ` +
      (TEXT.states[a.state] || a.state) + (a.policyNumber ? ` · ${TEXT.policy} ${a.policyNumber}` : "")));
  } else if (structured.premium && !event.is_error) {
    const p = structured.premium;
    article.append(element("p", { class: "premium" }, `${TEXT.premium}: ${money(p.gross, p.currency)} ${per(p)}`));
  }
  if (structured.defaults && structured.defaults.length) {
    const named = structured.defaults.map((d) => `${d.label} = ${d.value}`).join("; ");
    article.append(element("p", { class: "defaults" }, `${TEXT.assumed}: ${named}`));
  }
  // by hand the answer is open; a model's calls are collapsed, errors always shown
  // (a call waiting for the person: its text is the model's, the box below is theirs)
  const details = element("details", (event.by_hand && !waiting) || failed ? { open: "" } : {});
  details.append(element("summary", {}, TEXT.details));
  const args = event["gen_ai.tool.call.arguments"];
  if (args && Object.keys(args).length) details.append(element("pre", { class: "arguments" }, JSON.stringify(args, null, 2)));
  if (!waiting) details.append(readable(structured, event["mcp.server"]));  // the person's words
  // what a model sees, as text (English, the norm's terms): folded, for whoever wants it
  const modelText = element("details", { class: "model-text" });
  modelText.append(element("summary", {}, TEXT.modelText));
  modelText.append(element("pre", { class: "text" }, event.text || ""));
  details.append(modelText);
  article.append(details);
  const spec = (state.servers[event["mcp.server"]] || { tools: [] }).tools
    .find((t) => t.name === event["gen_ai.tool.name"]);
  if (spec && spec.readOnly && !event.is_error && !(args || {}).full) {
    const full = element("button", { type: "button", class: "full" }, TEXT.full);
    full.addEventListener("click", () => callByHand(event["mcp.server"], spec.name, { ...args, full: true }));
    article.append(full);
  }
  const steps = structured.nextSteps || [];
  if (steps.length) {
    const nav = element("div", { class: "steps", role: "group", "aria-label": TEXT.next });
    nav.append(element("h4", {}, TEXT.next));
    for (const step of steps) {
      const label = `${step.tool} · ${step.label || step.target}`;
      const button = element("button", { type: "button", "data-tool": step.tool }, label);
      const expected = expectedShapes(event["mcp.server"], structured, step);
      button.addEventListener("click", () => {
        const given = { ...(step.arguments || {}), ...(step.body ? { body: step.body } : {}) };
        if (nothingToFill(event["mcp.server"], step, given)) {  // one click: the call itself
          document.getElementById("call").hidden = true;  // no earlier form left to send again
          callByHand(event["mcp.server"], step.tool, given);
          return;
        }
        openForm(event["mcp.server"], step.tool, step.arguments || {}, step.body, expected,
          prefilled(structured, step));
      });
      nav.append(button);
    }
    // by hand the steps are the way on; after a model's call they are there to take over from it
    (event.by_hand || failed ? article : details).append(nav);
  }
  return article;
}

function fieldLabel(server, name) {
  // a risk object's field by its shape's name in the person's language, where a shape the
  // conversation was shown has it; else the property's own name
  for (const shape of Object.values(state.shapes[server] || {})) {
    const field = (shape.fields || []).find((f) => f.name === name);
    if (field) return (field.names && field.names[german ? "de" : "en"]) || field.label || name;
  }
  return name.split(/[#:/]/).pop();
}

function readable(answer, server) {
  // the structured answer in the person's language: the page's own words around the
  // insurer's labels (in the insurer's language), never the model's text
  for (const shape of answer.shapes || []) {  // fields named from here on, too
    if (shape.fields && shape.fields.length) {
      (state.shapes[server] = state.shapes[server] || {})[shape.iri] = shape;
    }
  }
  const box = element("div", { class: "readable" });
  const line = (text, cls) => box.append(element("p", cls ? { class: cls } : {}, text));
  if (answer.case) {
    const c = answer.case;
    line(`${TEXT.caseWord} ${c.caseId} · ${TEXT.caseStates[c.status] || c.status}`);
  }
  if (answer.products && answer.products.length) {
    line(`${TEXT.products}: ${answer.products.map((p) => p.label).join(", ")}`);
  }
  const draft = answer.draft;
  if (draft && answer.case) {
    const list = element("ul", { class: "draft", "aria-label": TEXT.draft });
    const value = (a) => `${a.label}: ${a.value === null || a.value === undefined ? "—" : a.value}`;
    for (const a of draft.attributes || []) list.append(element("li", {}, value(a)));
    for (const c of draft.components || []) {
      const shown = c.included ? (c.attributes || []).map(value).join("; ") : "";
      list.append(element("li", { class: c.included ? "in" : "out" },
        `${c.included ? "✓" : "✗"} ${c.label} (${c.included ? TEXT.included : TEXT.excluded})` +
        (shown ? `: ${shown}` : "")));
    }
    box.append(list);
  }
  if (answer.riskObjects) {
    if (!answer.riskObjects.length && answer.case) line(TEXT.riskObjectsNone);
    for (const r of answer.riskObjects) {
      const fields = Object.entries(r.fields || {})
        .map(([k, v]) => `${fieldLabel(server, k)} ${v}`).join(", ");
      line(`${TEXT.riskObject}: ${fields}`);
    }
  }
  if (answer.validation) {
    const v = answer.validation;
    line(v.conforms ? TEXT.conforms : `${TEXT.violations}: ` +
      (v.violations || []).map((x) => x.message).join("; "), v.conforms ? "" : "violations");
  }
  if (answer.offer) {
    const o = answer.offer;
    line(`${TEXT.offer} ${o.offerId} · ${TEXT.validUntil} ${o.validUntil || "—"}`);
  }
  if (answer.problem) line(`${TEXT.problem}: ${answer.problem.title || answer.problem.type}`);
  return box;
}

function nothingToFill(server, step, given) {
  // a step that expects no shape and whose every required argument the step names: nothing
  // for the person to fill in
  const spec = (state.servers[server] || { tools: [] }).tools.find((t) => t.name === step.tool);
  if (!spec || (step.expects || []).length) return false;
  const required = (spec.inputSchema && spec.inputSchema.required) || [];
  return required.every((name) => given[name] !== undefined);
}

function expectedShapes(server, structured, step) {
  // the shapes a step expects, with their fields: from the answer that offered it, else from
  // an earlier answer of the conversation at the same server (shown once per session)
  const known = (state.shapes[server] = state.shapes[server] || {});
  for (const shape of structured.shapes || []) if (shape.fields && shape.fields.length) known[shape.iri] = shape;
  const expects = step.expects || [];
  const given = expects.map((iri) => known[iri]).filter(Boolean);
  // a nested part's shape (the policyholder's, the payment's) may be named only in the root's
  const nested = Object.values(known).filter((x) => !expects.includes(x.iri));
  return [...given, ...nested];
}

function streaming(piece) {
  // the model's words while its call is under way; its recorded call replaces them
  let article = document.querySelector("#log article.streaming");
  if (!article) {
    article = element("article", { class: "model streaming" });
    article.append(element("p", { class: "said" }));
    add(article);
  }
  article.querySelector(".said").textContent += piece;
}

function render(event) {
  if (event.event === "gen_ai.client.inference" || event.event === "gen_ai.final_answer") {
    for (const shown of document.querySelectorAll("#log article.streaming")) shown.remove();
  }
  if (event.index !== undefined) {
    if (state.shown.has(event.index)) return;
    state.shown.add(event.index);
  }
  switch (event.event) {
    case "gen_ai.user.message":
      state.turn = [];
      add(element("article", { class: "user" }, `${TEXT.you}: ${event.text}`));
      break;
    case "gen_ai.client.inference": {
      state.usage.calls += 1;
      state.usage.input += (event["gen_ai.usage.input_tokens"] || 0) + (event["gen_ai.usage.cache_read_input_tokens"] || 0);
      state.usage.output += event["gen_ai.usage.output_tokens"] || 0;
      state.usage.cost += event.cost_usd || 0;
      showUsage();
      const article = element("article", { class: "model" });
      const calls = event.tool_calls || [];
      // the text of a call that asks for no tool is the final answer, shown as such
      if (event.text && calls.length) article.append(element("p", { class: "said" }, event.text));
      for (const call of calls) {
        article.append(element("p", { class: "asks" }, `→ ${TEXT.asks} ${call.name.replace("__", " · ")}`));
      }
      // what this one call of the model took and cost
      const inTokens = (event["gen_ai.usage.input_tokens"] || 0) + (event["gen_ai.usage.cache_read_input_tokens"] || 0);
      article.append(element("p", { class: "usage" }, `${inTokens.toLocaleString()} ${TEXT.tokensIn}, ` +
        `${(event["gen_ai.usage.output_tokens"] || 0).toLocaleString()} ${TEXT.tokensOut} · ` +
        new Intl.NumberFormat(german ? "de-DE" : "en-GB", { style: "currency", currency: "USD",
          maximumFractionDigits: 5 }).format(event.cost_usd || 0)));
      add(article);
      break;
    }
    case "mcp.tool.call":
      state.turn.push(event);
      add(toolArticle(event));
      if (event.confirmation) add(confirmationArticle(event.confirmation.url));
      break;
    case "chat.confirmation.asked":
      add(confirmationArticle(event.url));
      break;
    case "person.confirmation":
      for (const box of document.querySelectorAll("#log article.confirmation button")) box.disabled = true;
      add(element("article", { class: "person" },
        `${event.answer === "confirm" ? TEXT.confirmed : TEXT.declined} (${event.via})`));
      break;
    case "gen_ai.final_answer": {
      const article = element("article", { class: "final" });
      article.append(element("h3", {}, TEXT.answer));
      for (const call of state.turn) {
        const content = answerOf(call["mcp.tool.result"]);
        if (content.premium && !call.is_error) {
          article.append(element("p", { class: "premium" },
            `${call["mcp.server"]}: ${money(content.premium.gross, content.premium.currency)} ${per(content.premium)}`));
        }
      }
      article.append(element("p", { class: "said" }, event.text));
      add(article);
      break;
    }
    case "chat.turn.end":
      if (event.reason !== "done") add(element("article", { class: "error" }, `${TEXT.stopped}: ${event.detail}`));
      break;
    case "mcp.tool.list":
    case "mcp.tools.list":
    case "run.start":
      break;
    default:
      if (event["gen_ai.tool.name"] !== undefined) add(toolArticle(event));
  }
}

function follow(after) {
  const working = document.getElementById("working");
  const send = document.querySelector("#chat button[type=submit]");
  working.hidden = false;
  send.disabled = true;
  document.body.dataset.busy = "true";
  const stream = new EventSource(`/chat/api/conversations/${state.conversation}/events?after=${after}`);
  stream.onmessage = (message) => render(JSON.parse(message.data));
  stream.addEventListener("delta", (message) => streaming(JSON.parse(message.data).text));
  stream.addEventListener("idle", () => {
    stream.close();
    working.hidden = true;
    send.disabled = false;
    document.body.dataset.busy = "false";
  });
}

document.getElementById("chat").addEventListener("submit", async (submitted) => {
  submitted.preventDefault();
  const field = document.getElementById("message");
  const text = field.value.trim();
  if (!text) return;
  const answer = await api(`/chat/api/conversations/${state.conversation}/messages`, {
    method: "POST", body: JSON.stringify({ text }),
  });
  if (answer.status !== 202) {
    add(element("article", { class: "error" }, answer.body.detail));
    return;
  }
  field.value = "";
  if (!document.getElementById("task").value) document.getElementById("task").value = text;
  follow(answer.body.after);
});

document.getElementById("call").addEventListener("submit", async (submitted) => {
  submitted.preventDefault();
  const { server, tool } = state.current;
  let argumentsOut;
  try {
    argumentsOut = collect();
  } catch (error) {
    render({ "mcp.server": server, "gen_ai.tool.name": tool, is_error: true, text: String(error) });
    return;
  }
  await callByHand(server, tool, argumentsOut);
});

function expectedPremium() {
  const value = document.getElementById("expected").value;
  return value === "" ? null : Number(value);
}

document.getElementById("save").addEventListener("submit", async (submitted) => {
  submitted.preventDefault();
  const response = await fetch(`/chat/api/conversations/${state.conversation}/scenario`, {
    method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ task: document.getElementById("task").value, premium: expectedPremium() }),
  });
  if (!response.ok) {
    const problem = await response.json();
    add(element("article", { class: "error" }, `${TEXT.save}: ${problem.detail}`));
    return;
  }
  const link = element("a", { download: "scenario.yaml" });
  link.href = URL.createObjectURL(new Blob([await response.text()], { type: "application/yaml" }));
  link.click();
});

document.getElementById("grade").addEventListener("click", async () => {
  const verdict = document.getElementById("verdict");
  const answer = await api(`/chat/api/conversations/${state.conversation}/grade`, {
    method: "POST",
    body: JSON.stringify({ task: document.getElementById("task").value, premium: expectedPremium() }),
  });
  verdict.replaceChildren();
  if (answer.status !== 200) {
    verdict.append(element("p", { class: "error" }, answer.body.detail));
    return;
  }
  verdict.dataset.passed = String(answer.body.passed);
  verdict.append(element("p", { class: "grade" }, `${TEXT.grade}: ${answer.body.passed ? TEXT.passed : TEXT.failed}`));
  const list = element("ul");
  for (const c of answer.body.criteria) {
    list.append(element("li", { class: c.passed ? "passed" : "failed" }, `${c.passed ? "✓" : "✗"} ${c.name}: ${c.reason}`));
  }
  verdict.append(list);
});

document.getElementById("delete").addEventListener("click", async () => {
  const answer = await api(`/chat/api/conversations/${state.conversation}`, { method: "DELETE" });
  if (answer.status === 204) {
    history.replaceState(null, "", "/chat");  // a new, empty conversation
    location.reload();
  }
});

document.getElementById("personal").addEventListener("change", async (changed) => {
  const keep = changed.target.checked;
  const answer = await api(`/chat/api/conversations/${state.conversation}/personal`, {
    method: "POST", body: JSON.stringify({ keep }),
  });
  if (answer.status !== 200) changed.target.checked = !keep;
});

document.getElementById("logout").addEventListener("click", async () => {
  await api("/chat/api/logout", { method: "POST", body: "{}" });
  location.reload();
});

async function main() {
  const listed = await api("/chat/api/servers");
  if (listed.status === 401) {  // the MCP servers want a broker's token: log in first
    document.getElementById("mode").textContent = TEXT.mustLogIn;
    document.getElementById("login").hidden = false;
    document.getElementById("keep").hidden = true;
    document.body.dataset.ready = "login";
    return;
  }
  if (listed.body.broker) {
    document.getElementById("who").hidden = false;
    document.getElementById("broker").textContent = `${TEXT.broker} ${listed.body.broker}`;
  }
  state.model = listed.body.model;
  const nav = document.getElementById("servers");
  for (const server of listed.body.servers) {
    state.servers[server.name] = server;
    const section = element("section", { "data-server": server.name });
    section.append(element("h2", {}, server.displayName));
    if (server.error) section.append(element("p", { class: "error", role: "alert" }, server.error));
    // where a task begins: the norm's entry, the insurer's products; every answer's next steps
    // lead on from there. The other tools are there too, folded away
    const all = element("details", { class: "tools" });
    all.append(element("summary", {}, TEXT.allTools.replace("{n}", String(server.tools.length))));
    for (const tool of server.tools) {
      const button = element("button", { type: "button", "data-tool": tool.name }, tool.name);
      button.title = tool.title || "";
      button.addEventListener("click", () => openForm(server.name, tool.name));
      if (ENTRY.includes(tool.name)) {
        button.textContent = TEXT.start;
        button.classList.add("start");
        section.append(element("p", { class: "hint" }, TEXT.startHint), button);
      } else {
        all.append(button);
      }
    }
    section.append(all);
    nav.append(section);
  }
  document.getElementById("mode").textContent = state.model ? `${TEXT.chat} (${state.model.name})` : TEXT.noModel;
  document.getElementById("chat").hidden = !state.model;
  // a conversation in the address (#c=…) is taken up again, if it is this browser's
  const kept = new URLSearchParams(location.hash.slice(1)).get("c");
  const resumed = kept ? await api(`/chat/api/conversations/${kept}`) : null;
  if (resumed && resumed.status === 200) {
    state.conversation = kept;
    document.getElementById("personal").checked = Boolean(resumed.body.keepPersonal);
    for (const [index, event] of resumed.body.events.entries()) render({ ...event, index });
    if (resumed.body.busy) follow(resumed.body.events.length - 1);
  } else {
    const started = await api("/chat/api/conversations", { method: "POST", body: "{}" });
    state.conversation = started.body.id;
    history.replaceState(null, "", `#c=${state.conversation}`);
  }
  document.body.dataset.conversation = state.conversation;
  document.getElementById("download").href =
    `/chat/api/conversations/${state.conversation}/protocol.jsonl`;
  if (state.model) document.getElementById("message").focus();
  document.body.dataset.ready = "true";
}

main();
