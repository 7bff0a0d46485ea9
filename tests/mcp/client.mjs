// tests/mcp/client.mjs MCP_COMMAND CONFIG - cardbaton-mcp through the
// official MCP TypeScript SDK (@modelcontextprotocol/sdk: Client and
// StdioClientTransport), as an assistant would use it: initialize, list
// the tools, submit a short job, see it in status, wait for it, read its
// log, and get a tool error back as one.  tests/e2e/mcp.bats runs it
// with a daemon on CONFIG's spool.  Prints one "ok - ..." line per
// check; exits 1 at the first that fails (the line says why).
//
// The SDK is installed by `npm ci --prefix tests/mcp` (package-lock.json
// pins it); without it this says so and exits 2.

import assert from "node:assert/strict";

let Client, StdioClientTransport;
try {
	({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
	({ StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js"));
} catch (e) {
	console.error(`tests/mcp/client.mjs: the MCP SDK is not installed (${e.code || e.message}); ` +
		"run: npm ci --prefix tests/mcp");
	process.exit(2);
}

const [command, config] = process.argv.slice(2);
if (!command || !config) {
	console.error("usage: node tests/mcp/client.mjs MCP_COMMAND CONFIG");
	process.exit(64);
}

const TOOLS = ["submit", "status", "logs", "gpus", "pause", "resume", "cancel", "promote", "wait"];

function ok(what) {
	console.log(`ok - ${what}`);
}

const transport = new StdioClientTransport({
	command,
	args: ["--config", config],
	env: { ...process.env },     // the test's PATH, HOME, CARDBATON_* (the SDK passes few by default)
	stderr: "inherit",
});
const client = new Client({ name: "cardbaton-tests", version: "1.0.0" });

// One call, the SDK's result; a text block is always there.
async function call(name, args) {
	const r = await client.callTool({ name, arguments: args });
	assert.ok(Array.isArray(r.content) && r.content[0]?.type === "text", `${name}: no text content`);
	return r;
}

try {
	await client.connect(transport);        // initialize + notifications/initialized
	const info = client.getServerVersion();
	assert.equal(info.name, "cardbaton");
	assert.match(info.version, /^\d+\.\d+/);
	assert.ok(client.getServerCapabilities()?.tools, "tools capability");
	ok(`initialize: ${info.name} ${info.version}`);

	const { tools } = await client.listTools();
	const names = tools.map((t) => t.name);
	for (const t of TOOLS)
		assert.ok(names.includes(t), `tool ${t} listed (got ${names.join(", ")})`);
	for (const t of tools)
		assert.equal(t.inputSchema?.type, "object", `${t.name}: inputSchema`);
	const submit = tools.find((t) => t.name === "submit");
	assert.equal(submit.inputSchema.properties.command.type, "array");
	assert.equal(submit.inputSchema.properties.gpu_count.type, "integer");
	assert.deepEqual(tools.find((t) => t.name === "logs").inputSchema.required, ["job_id"]);
	ok(`tools/list: ${names.join(" ")}`);

	let r = await call("submit", {
		command: ["sh", "-c", "echo hello from mcp; echo to stderr >&2"],
		gpu_count: 0,
		name: "mcp-test",
	});
	assert.equal(r.isError, false, r.content[0].text);
	const job = r.structuredContent?.jobs?.[0];
	assert.ok(job && /^\d+$/.test(job.id), `submit: a job in structuredContent: ${r.content[0].text}`);
	assert.equal(job.name, "mcp-test");
	assert.deepEqual(job.command, ["sh", "-c", "echo hello from mcp; echo to stderr >&2"]);
	assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
	const id = job.id;
	ok(`submit: job ${id}, ${job.state}`);

	r = await call("status", { job_ids: [id] });
	assert.equal(r.isError, false, r.content[0].text);
	assert.equal(r.structuredContent.jobs.length, 1);
	assert.equal(r.structuredContent.jobs[0].id, id);
	assert.ok(Array.isArray(r.structuredContent.nodes));
	r = await call("status", {});
	assert.ok(r.structuredContent.jobs.some((j) => j.id === id) ||
		  (await call("status", { all: true })).structuredContent.jobs.some((j) => j.id === id));
	ok(`status: job ${id} is there`);

	r = await call("wait", { job_ids: [id], timeout: 60 });
	assert.equal(r.isError, false, r.content[0].text);
	assert.equal(r.structuredContent.jobs[0].state, "succeeded", r.content[0].text);
	assert.equal(r.structuredContent.jobs[0].exit_code, 0);
	ok(`wait: job ${id} succeeded`);

	// status's filters, as arguments.
	r = await call("status", { state: "succeeded", since: "1h", name: "mcp-*" });
	assert.equal(r.isError, false, r.content[0].text);
	assert.deepEqual(r.structuredContent.jobs.map((j) => j.id), [id]);
	r = await call("status", { state: "succeeded", node: "local" });
	assert.ok(r.structuredContent.jobs.some((j) => j.id === id));
	r = await call("status", { state: "bogus" });
	assert.equal(r.isError, true);
	assert.match(r.content[0].text, /--state: 'bogus' is not a state/);
	ok("status: filters");

	r = await call("logs", { job_id: id });
	assert.equal(r.isError, false, r.content[0].text);
	assert.match(r.content[0].text, /hello from mcp/);
	assert.match(r.content[0].text, /to stderr/);
	assert.equal(r.structuredContent, undefined);
	ok("logs: the job's output");

	r = await call("cancel", { job_id: "999999" });
	assert.equal(r.isError, true);
	assert.equal(r.content[0].text, "cardbaton-cancel: no such job 999999");
	assert.equal(r.structuredContent.exit_code, 66);
	r = await call("cancel", { job_id: id });      // it has ended: refused, exit 1
	assert.equal(r.isError, true);
	assert.match(r.content[0].text, /^cardbaton-cancel: /);
	assert.equal(r.structuredContent.exit_code, 1);
	ok("cancel: errors are tool errors with the tool's message");

	r = await call("submit", { command: "echo hi" });
	assert.equal(r.isError, true);
	assert.match(r.content[0].text, /argument 'command' must be a non-empty array of strings/);
	assert.equal(r.structuredContent.exit_code, 64);
	ok("submit: a bad argument is a tool error");

	await assert.rejects(client.callTool({ name: "frobnicate", arguments: {} }),
		(e) => e.code === -32602 && /unknown tool/.test(e.message));
	ok("an unknown tool is JSON-RPC error -32602");

	await client.ping();
	ok("ping");
	await client.close();
	ok("closed");
} catch (e) {
	console.log(`not ok - ${e.stack || e}`);
	try {
		await client.close();
	} catch {
		// closing is best effort here
	}
	process.exit(1);
}
