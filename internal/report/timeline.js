// The threads' timeline of the profile in the element #profile
// (report.htmlTimeline in timeline.go documents it): a row per thread, each
// time slot a bar of the shares of its time the thread spent on its CPU
// (from below), waiting for a CPU, and blocked (on top); hovering a slot
// names its heaviest stack of each. It runs before the flame graph's script, which then
// lays itself out in the room the rows leave.
'use strict';
(() => {
	const data = JSON.parse(document.getElementById('profile').textContent);
	// By kind of time, in the order of htmlThread's arrays.
	const KINDS = [
		{ color: 'hsl(14, 78%, 57%)', label: 'on CPU', tip: 'On CPU in' },
		{ color: 'hsl(212, 62%, 56%)', label: 'blocked', tip: 'Blocked in' },
		{ color: 'hsl(45, 90%, 58%)', label: 'waiting for a CPU', tip: 'Waiting for a CPU (preempted) in' },
	];
	const ON = 0, BLOCKED = 1, RUNNABLE = 2, EMPTY = '#eceef2', HOVER = '#111';
	// Lines of a stack in the tooltip, at most: the first stack shown, and
	// each after it, so that three fit in a window.
	const FIRST_LINES = 16, LINES = 8;
	const KIND = { j: 'JIT-compiled', n: 'native', k: 'kernel', u: 'unresolved address' };

	const $ = (id) => document.getElementById(id);
	const section = $('timeline'), rows = $('trows'), sum = $('tsum'), tip = $('tip'), status = $('status');
	let stage = -1, tl = null, canvases = [], hover = null;

	function stageInHash() {
		const v = Number(new URLSearchParams(location.hash.slice(1)).get('stage'));
		return Number.isInteger(v) && v >= 0 && v < data.stages.length ? v : 0;
	}

	const pct = (v, total) => `${total > 0 ? (100 * v / total).toFixed(1) : '0.0'}%`;
	function duration(ns) {
		for (const [u, d] of [['s', 1e9], ['ms', 1e6], ['µs', 1e3]]) {
			if (ns >= d) return `${(ns / d).toPrecision(3)} ${u}`;
		}
		return `${ns} ns`;
	}
	const sumOf = (a) => a.reduce((x, y) => x + y, 0);

	function swatch(color, label) {
		const span = document.createElement('span'), sw = document.createElement('i');
		span.className = 'key';
		sw.style.background = color;
		span.append(sw, label);
		return span;
	}

	// build makes the rows of stage s's timeline, or hides the section.
	function build(s) {
		stage = s;
		tl = data.stages[s].timeline || null;
		section.hidden = !tl;
		hover = null;
		canvases = [];
		rows.replaceChildren();
		sum.replaceChildren();
		if (!tl) return;
		const title = document.createElement('b');
		title.textContent = 'Threads over time';
		sum.append(title, `${tl.threads.length} thread${tl.threads.length === 1 ? '' : 's'}, ${tl.slots} slots of ${duration(tl.width)}`);
		KINDS.forEach((k, i) => {
			if (i !== ON || tl.cpu) sum.append(swatch(k.color, k.label));
		});
		if (tl.hidden) sum.append(`${tl.hidden} more thread${tl.hidden === 1 ? '' : 's'} not shown (${duration(tl.hiddenTime)})`);
		tl.threads.forEach((th, i) => {
			const row = document.createElement('div'), name = document.createElement('span'), share = document.createElement('span');
			const canvas = document.createElement('canvas');
			row.className = 'trow';
			row.dataset.tid = th.tid;
			name.className = 'tname';
			name.textContent = `${th.comm} ${th.tid}`;
			name.title = `${th.comm}: thread ${th.tid} of process ${th.pid}`;
			share.className = 'tshare';
			const t = th.time.map(sumOf), all = sumOf(t);
			share.textContent = tl.cpu ? `${pct(t[BLOCKED], all)} blocked` : `${duration(t[BLOCKED])} blocked`;
			share.title = `${tl.cpu ? `On its CPU ${duration(t[ON])}, b` : 'B'}locked ${duration(t[BLOCKED])}, waiting for a CPU ${duration(t[RUNNABLE])}`;
			canvas.setAttribute('role', 'img');
			canvas.setAttribute('aria-label', `Timeline of ${th.comm} ${th.tid}`);
			canvas.addEventListener('mousemove', (e) => point(i, e));
			canvas.addEventListener('mouseleave', leave);
			row.append(name, share, canvas);
			rows.append(row);
			canvases.push(canvas);
		});
		drawAll();
	}

	function drawAll() {
		canvases.forEach((_, i) => draw(i));
	}

	// draw paints thread i's row: per slot, its kinds of time stacked in
	// their order from the bottom, as shares of the slot.
	function draw(i) {
		const canvas = canvases[i], th = tl.threads[i], dpr = window.devicePixelRatio || 1;
		const w = canvas.clientWidth, h = canvas.clientHeight;
		if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
			canvas.width = Math.round(w * dpr);
			canvas.height = Math.round(h * dpr);
		}
		const ctx = canvas.getContext('2d');
		ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
		ctx.clearRect(0, 0, w, h);
		ctx.fillStyle = EMPTY;
		ctx.fillRect(0, 0, w, h);
		const step = w / tl.slots;
		for (let s = 0; s < tl.slots; s++) {
			let below = 0;
			for (const kind of [ON, RUNNABLE, BLOCKED]) {
				const share = Math.min(1 - below, th.time[kind][s] / tl.width);
				if (share <= 0) continue;
				ctx.fillStyle = KINDS[kind].color;
				ctx.fillRect(s * step, h * (1 - below - share), step, h * share);
				below += share;
			}
		}
		if (hover && hover.row === i) {
			ctx.strokeStyle = HOVER;
			ctx.lineWidth = 1.5;
			ctx.strokeRect(hover.slot * step + 0.75, 0.75, Math.max(step - 1.5, 1), h - 1.5);
		}
	}

	// stackLines are the lines that show stack k, leaf first: a run of
	// kernel frames is one line, and past max lines the callers are
	// counted.
	function stackLines(k, max) {
		const frames = tl.stacks[k].slice().reverse(), lines = [];
		for (let i = 0; i < frames.length;) {
			const f = frames[i], kind = data.kind[f];
			let j = i + 1;
			if (kind === 'k') while (j < frames.length && data.kind[frames[j]] === 'k') j++;
			const line = document.createElement('div');
			line.className = `frame ${kind}`;
			line.textContent = j - i > 1 ? `${data.names[f]} … ${data.names[frames[j - 1]]} (kernel, ${j - i} frames)` : data.names[f];
			line.title = KIND[kind] || '';
			if (lines.length === max) {
				line.className = 'frame';
				line.textContent = `… ${frames.length - i} more callers`;
				lines.push(line);
				break;
			}
			lines.push(line);
			i = j;
		}
		return lines;
	}

	function describe(row, slot, e) {
		const th = tl.threads[row], from = slot * tl.width;
		const name = document.createElement('div'), sub = document.createElement('div');
		name.className = 'name';
		name.textContent = `${th.comm} ${th.tid}`;
		sub.className = 'sub';
		const shares = KINDS.map((k, i) => (i !== ON || tl.cpu ? `${k.label} ${pct(th.time[i][slot], tl.width)}` : '')).filter((x) => x);
		sub.textContent = `${(from / 1e9).toFixed(3)}–${((from + tl.width) / 1e9).toFixed(3)} s: ${shares.join(', ')}`;
		const parts = [name, sub];
		for (const kind of [BLOCKED, RUNNABLE, ON]) {
			const stack = th.stack[kind][slot];
			if (stack < 0) continue;
			const head = document.createElement('div');
			head.className = 'head';
			head.textContent = `${KINDS[kind].tip} (${duration(th.top[kind][slot])}, the heaviest stack):`;
			parts.push(head, ...stackLines(stack, parts.length === 2 ? FIRST_LINES : LINES));
		}
		if (parts.length === 2) parts.push(Object.assign(document.createElement('div'), { textContent: 'No samples in this slot.' }));
		tip.replaceChildren(...parts);
		tip.hidden = false;
		const r = tip.getBoundingClientRect();
		let x = e.clientX + 14, y = e.clientY + 18;
		if (x + r.width > innerWidth - 4) x = Math.max(4, e.clientX - r.width - 14);
		if (y + r.height > innerHeight - 4) y = Math.max(4, e.clientY - r.height - 12);
		tip.style.left = `${x}px`;
		tip.style.top = `${y}px`;
		const b = document.createElement('b');
		b.textContent = `${th.comm} ${th.tid}`;
		status.replaceChildren(b, ` — ${sub.textContent}`);
	}

	function point(row, e) {
		const r = canvases[row].getBoundingClientRect();
		const slot = Math.min(tl.slots - 1, Math.max(0, Math.floor((e.clientX - r.left) / r.width * tl.slots)));
		const was = hover;
		hover = { row, slot };
		if (was && was.row !== row) draw(was.row);
		draw(row);
		describe(row, slot, e);
	}

	function leave() {
		const was = hover;
		hover = null;
		if (was) draw(was.row);
		tip.hidden = true;
		status.replaceChildren();
	}

	// The flame graph lays itself out on a resize: a stage of another
	// number of rows changes the room it has.
	addEventListener('hashchange', () => {
		if (stageInHash() !== stage) {
			build(stageInHash());
			dispatchEvent(new Event('resize'));
		}
	});
	addEventListener('resize', () => tl && drawAll());
	build(stageInHash());
})();
