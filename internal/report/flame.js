// The flame graph of the profile in the element #profile (report.htmlData
// in html.go documents it). The view's state lives in the URL's fragment
// (#stage=1&zoom=42&search=fib&view=flame), so that the browser's Back
// button zooms out again and a view can be bookmarked.
'use strict';
(() => {
	const data = JSON.parse(document.getElementById('profile').textContent);
	const ROW = 18; // px per frame
	const MIN_WIDTH = 0.5; // px: narrower boxes, and all above them, are not drawn
	const LABEL_MIN = 22; // px: narrower boxes get no label
	const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif';
	const MATCH = 'hsl(300, 70%, 62%)';
	const KIND = { j: 'JIT-compiled', n: 'native', k: 'kernel', u: 'unresolved address', c: 'command', r: 'the whole profile' };
	const LEGEND = [['j', 'JIT'], ['n', 'native'], ['k', 'kernel'], ['u', 'unknown']];

	const $ = (id) => document.getElementById(id);
	const canvas = $('canvas'), ctx = canvas.getContext('2d'), scroller = $('scroller'), spacer = $('spacer');
	const tip = $('tip'), status = $('status'), search = $('search');
	const baseTitle = document.title;

	// The tree of a stage, decoded into arrays indexed by node, in preorder:
	// a node's subtree is the nodes from it up to end; start is where it
	// begins on the x axis, in units of value.
	const trees = [];
	function tree(s) {
		if (trees[s]) return trees[s];
		const a = data.stages[s].nodes, n = a.length / 3;
		const t = {
			n, frame: new Int32Array(n), value: new Float64Array(n), self: new Float64Array(n),
			start: new Float64Array(n), end: new Int32Array(n), parent: new Int32Array(n),
			depth: new Int32Array(n), maxDepth: new Int32Array(n), kinds: {},
		};
		const open = [], left = [], next = [];
		for (let i = 0; i < n; i++) {
			t.frame[i] = a[3 * i];
			t.value[i] = t.self[i] = a[3 * i + 1];
			const d = open.length;
			t.parent[i] = -1;
			if (d > 0) {
				t.parent[i] = open[d - 1];
				t.start[i] = next[d - 1];
				next[d - 1] += t.value[i];
				left[d - 1]--;
			}
			t.depth[i] = t.maxDepth[i] = d;
			open.push(i);
			left.push(a[3 * i + 2]);
			next.push(t.start[i]);
			while (open.length > 0 && left[open.length - 1] === 0) {
				t.end[open.pop()] = i + 1;
				left.pop();
				next.pop();
			}
		}
		for (let i = n - 1; i > 0; i--) {
			const p = t.parent[i];
			t.self[p] -= t.value[i];
			t.maxDepth[p] = Math.max(t.maxDepth[p], t.maxDepth[i]);
		}
		for (let i = 0; i < n; i++) {
			const k = data.kind[t.frame[i]];
			t.kinds[k] = (t.kinds[k] || 0) + t.self[i];
		}
		return (trees[s] = t);
	}

	function hash(s) {
		let h = 2166136261;
		for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
		return (h >>> 0) / 4294967296;
	}

	// Colours by kind, each name its own shade so that neighbours differ.
	function shade(kind, v) {
		switch (kind) {
			case 'j': return `hsl(${100 + 35 * v}, ${50 + 15 * v}%, ${52 + 10 * v}%)`;
			case 'n': return `hsl(${10 + 30 * v}, ${75 + 10 * v}%, ${62 + 8 * v}%)`;
			case 'k': return `hsl(${200 + 25 * v}, ${55 + 15 * v}%, ${66 + 8 * v}%)`;
			case 'u': return `hsl(0, 0%, ${72 + 10 * v}%)`;
		}
		return `hsl(220, 15%, ${80 + 6 * v}%)`;
	}
	const colors = [];
	const color = (f) => colors[f] || (colors[f] = shade(data.kind[f], hash(data.names[f])));

	function fmt(v) {
		if (data.type === 'samples') return `${v.toLocaleString('en-US')} sample${v === 1 ? '' : 's'}`;
		if (data.unit === 'nanoseconds') {
			for (const [u, d] of [['s', 1e9], ['ms', 1e6], ['µs', 1e3]]) {
				if (v >= d) return `${(v / d).toPrecision(3)} ${u}`;
			}
			return `${v} ns`;
		}
		return `${v.toLocaleString('en-US')} ${data.unit === 'count' ? data.type : data.unit}`;
	}
	const pct = (v, total) => `${total > 0 ? (100 * v / total).toFixed(2) : '0.00'}%`;
	const moduleOf = (f) => (data.module[f] >= 0 ? data.modules[data.module[f]] : '');

	// State, and the view's geometry as last laid out.
	let state = { stage: 0, zoom: 0, search: '', flame: false };
	let T = tree(0);
	let base = 0; // content y below the root's row (flame) or 0 (icicle)
	let matches = null, matchQuery = ''; // by frame: whether the search matches its name
	let hover = -1, mouse = null;

	function parseHash() {
		const h = new URLSearchParams(location.hash.slice(1));
		const int = (k, n) => {
			const v = Number(h.get(k));
			return Number.isInteger(v) && v >= 0 && v < n ? v : 0;
		};
		const stage = int('stage', data.stages.length);
		return { stage, zoom: int('zoom', tree(stage).n), search: h.get('search') || '', flame: h.get('view') === 'flame' };
	}

	function hashOf(s) {
		const h = new URLSearchParams();
		if (s.stage) h.set('stage', s.stage);
		if (s.zoom) h.set('zoom', s.zoom);
		if (s.search) h.set('search', s.search);
		if (s.flame) h.set('view', 'flame');
		return `#${h}`;
	}

	const currentHash = () => location.hash || '#';
	const contentY = (d) => (state.flame ? base - (d + 1) * ROW : d * ROW);

	// go shows the state next, recording it in the fragment as a new
	// history entry (push), in place of the current one (replace), or not at
	// all (from the fragment). A zoom keeps the zoomed row where it was on
	// screen, so that the frame clicked does not jump, unless that would
	// leave little room for what it called.
	function go(next, how) {
		let keep = null;
		if (next.stage === state.stage && next.flame === state.flame) {
			const h = scroller.clientHeight, y = contentY(T.depth[next.zoom]) - scroller.scrollTop;
			if (y >= 0 && y < h) keep = state.flame ? Math.max(y, 0.75 * h - ROW) : Math.min(y, 0.25 * h);
		}
		state = next;
		const h = hashOf(state);
		if (how === 'push' && h !== currentHash()) location.hash = h;
		else if (how === 'replace') location.replace(h);
		show(keep);
	}

	function show(keep) {
		T = tree(state.stage);
		if (state.search !== matchQuery) setMatches(state.search);
		layout();
		const y = contentY(T.depth[state.zoom]);
		scroller.scrollTop = keep !== null ? y - keep : state.flame ? y + 4 * ROW - scroller.clientHeight : y - 3 * ROW;
		hover = mouse ? nodeAt(mouse.px, mouse.py) : -1;
		controls();
		draw();
	}

	// layout sizes the scrolled area to the zoomed frame's stacks, and
	// enough beyond for its row to scroll to where go puts it.
	function layout() {
		const h = scroller.clientHeight, z = state.zoom;
		const content = Math.max((T.maxDepth[z] + 2) * ROW, (T.depth[z] + 1) * ROW + 0.75 * h);
		base = Math.max(h, content);
		spacer.style.height = `${Math.max(0, content - h)}px`;
		$('empty').hidden = T.value[0] > 0;
	}

	function setMatches(q) {
		matchQuery = q;
		matches = null;
		if (!q) return;
		let re;
		try {
			re = new RegExp(q, 'i');
		} catch {
			re = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
		}
		matches = new Uint8Array(data.names.length);
		for (let f = 0; f < matches.length; f++) matches[f] = data.kind[f] !== 'r' && re.test(data.names[f]) ? 1 : 0;
	}

	// matched sums the stacks below i that hold a matching frame, each once.
	function matched(i) {
		let sum = 0;
		for (let j = i, e = T.end[i]; j < e;) {
			if (matches[T.frame[j]]) {
				sum += T.value[j];
				j = T.end[j];
			} else j++;
		}
		return sum;
	}

	function controls() {
		const z = state.zoom, stage = data.stages[state.stage], total = T.value[0];
		$('parent').disabled = $('reset').disabled = z === 0;
		$('icicle').classList.toggle('on', !state.flame);
		$('flame').classList.toggle('on', state.flame);
		let info = `${data.event} · ${stage.samples.toLocaleString('en-US')} sample${stage.samples === 1 ? '' : 's'}`;
		if (data.type !== 'samples') info += ` · weighed by ${data.type}: ${fmt(total)}`;
		$('info').textContent = info;
		const sel = $('stage');
		sel.hidden = data.stages.length < 2;
		if (!sel.options.length) {
			data.stages.forEach((s, i) => sel.add(new Option(`stage ${s.name || i + 1}`, i)));
		}
		sel.value = state.stage;
		if (search.value !== state.search) search.value = state.search;

		const m = $('match');
		m.classList.toggle('hit', !!matches);
		m.textContent = '';
		if (matches) {
			const v = matched(0);
			m.textContent = `matches ${pct(v, total)} of ${data.type === 'samples' ? 'samples' : data.type} (${fmt(v)})`;
			if (z) m.textContent += `, ${pct(matched(z), T.value[z])} of ${data.names[T.frame[z]]}`;
		}

		const legend = $('legend');
		legend.replaceChildren(...LEGEND.map(([k, label]) => {
			const span = document.createElement('span'), sw = document.createElement('i');
			span.className = 'key';
			sw.style.background = shade(k, 0.5);
			span.append(sw, `${label} ${pct(T.kinds[k] || 0, total)}`);
			span.title = `Frames of ${KIND[k]} code: their own share of the ${data.type === 'samples' ? 'samples' : data.type}`;
			return span;
		}));
		document.title = z ? `${data.names[T.frame[z]]} — ${baseTitle}` : baseTitle;
		describe(hover);
	}

	let drawPending = false;
	function redraw() {
		if (!drawPending) {
			drawPending = true;
			requestAnimationFrame(() => {
				drawPending = false;
				draw();
			});
		}
	}

	// draw paints the rows in view: the zoomed node's ancestors across the
	// whole width, dimmed, and its subtree, skipping what is too narrow to
	// see or outside the rows in view.
	function draw() {
		const dpr = window.devicePixelRatio || 1, w = scroller.clientWidth, h = scroller.clientHeight;
		if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
			canvas.width = Math.round(w * dpr);
			canvas.height = Math.round(h * dpr);
			canvas.style.height = `${h}px`;
		}
		ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
		ctx.clearRect(0, 0, w, h);
		ctx.font = FONT;
		ctx.textBaseline = 'middle';
		if (!T.value[state.zoom]) return;
		const z = state.zoom, top = scroller.scrollTop, x0 = T.start[z], scale = w / T.value[z];
		const first = state.flame ? Math.floor((base - top - h) / ROW) : Math.floor(top / ROW);
		const last = state.flame ? Math.ceil((base - top) / ROW) : Math.ceil((top + h) / ROW);
		for (let a = T.parent[z]; a >= 0; a = T.parent[a]) {
			if (T.depth[a] >= first && T.depth[a] <= last) box(a, 0, w, top, true);
		}
		for (let i = z, e = T.end[z]; i < e;) {
			const bw = T.value[i] * scale, d = T.depth[i];
			if (bw < MIN_WIDTH || d > last) {
				i = T.end[i];
				continue;
			}
			if (d >= first) box(i, (T.start[i] - x0) * scale, bw, top, false);
			i++;
		}
	}

	const widths = new Float64Array(data.names.length).fill(-1);
	function label(f, room) {
		const s = data.names[f];
		if (widths[f] < 0) widths[f] = ctx.measureText(s).width;
		if (widths[f] <= room) return s;
		let n = Math.floor(s.length * room / widths[f]);
		while (n > 0 && ctx.measureText(`${s.slice(0, n)}…`).width > room) n--;
		return n > 1 ? `${s.slice(0, n)}…` : '';
	}

	function box(i, x, w, top, dim) {
		const y = contentY(T.depth[i]) - top, f = T.frame[i];
		ctx.globalAlpha = dim ? 0.6 : 1;
		ctx.fillStyle = matches && matches[f] ? MATCH : color(f);
		ctx.fillRect(x, y, w > 2 ? w - 1 : w, ROW - 1);
		if (w >= LABEL_MIN) {
			const s = label(f, w - 7);
			if (s) {
				ctx.fillStyle = '#111';
				ctx.fillText(s, x + 3, y + ROW / 2);
			}
		}
		if (i === hover) {
			ctx.globalAlpha = 1;
			ctx.strokeStyle = '#111';
			ctx.lineWidth = 1.5;
			ctx.strokeRect(x + 0.75, y + 0.75, Math.max(w - 2.5, 1), ROW - 2.5);
		}
		ctx.globalAlpha = 1;
	}

	// nodeAt returns the node drawn at (px, py) on the canvas, or -1.
	function nodeAt(px, py) {
		const w = scroller.clientWidth, yc = py + scroller.scrollTop;
		const d = Math.floor(state.flame ? (base - yc) / ROW : yc / ROW);
		const z = state.zoom;
		if (d < 0 || px < 0 || px >= w) return -1;
		if (d < T.depth[z]) {
			let a = z;
			while (T.depth[a] > d) a = T.parent[a];
			return a;
		}
		const scale = w / T.value[z], x = T.start[z] + px / scale;
		let i = z;
		while (T.depth[i] < d) {
			let c = i + 1;
			while (c < T.end[i] && !(x >= T.start[c] && x < T.start[c] + T.value[c])) c = T.end[c];
			if (c >= T.end[i]) return -1;
			i = c;
		}
		return T.value[i] * scale >= MIN_WIDTH ? i : -1;
	}

	// describe puts what i is in the tooltip and the status line, or, with
	// no node (-1), how to use the page.
	function describe(i) {
		const total = T.value[0], z = state.zoom;
		if (i < 0) {
			tip.hidden = true;
			status.replaceChildren();
			if (z) {
				const b = document.createElement('b');
				b.textContent = data.names[T.frame[z]];
				status.append('Zoomed into ', b, ` (${pct(T.value[z], total)}). `);
			}
			status.append('Click a frame to zoom in, Esc to zoom out, / to search.');
			return;
		}
		const f = T.frame[i], mod = moduleOf(f);
		let shares = `${fmt(T.value[i])}, ${pct(T.value[i], total)}`;
		if (z && i !== z && T.depth[i] > T.depth[z]) shares += ` (${pct(T.value[i], T.value[z])} of the zoomed frame)`;
		if (T.self[i] > 0 && T.self[i] < T.value[i]) shares += `; self ${fmt(T.self[i])}, ${pct(T.self[i], total)}`;
		const kind = `${KIND[data.kind[f]]}${mod ? ` in ${mod}` : ''}`;

		const name = document.createElement('div'), sub = document.createElement('div'), val = document.createElement('div');
		name.className = 'name';
		sub.className = 'sub';
		name.textContent = data.names[f];
		sub.textContent = kind;
		val.textContent = shares;
		tip.replaceChildren(name, sub, val);
		const b = document.createElement('b');
		b.textContent = data.names[f];
		status.replaceChildren(b, ` — ${kind} — ${shares}`);
		if (mouse) {
			tip.hidden = false;
			const r = tip.getBoundingClientRect();
			let x = mouse.x + 14, y = mouse.y + 18;
			if (x + r.width > innerWidth - 4) x = Math.max(4, mouse.x - r.width - 14);
			if (y + r.height > innerHeight - 4) y = Math.max(4, mouse.y - r.height - 12);
			tip.style.left = `${x}px`;
			tip.style.top = `${y}px`;
		}
	}

	function pointAt(e) {
		const r = canvas.getBoundingClientRect();
		mouse = { x: e.clientX, y: e.clientY, px: e.clientX - r.left, py: e.clientY - r.top };
		const i = nodeAt(mouse.px, mouse.py);
		if (i !== hover) {
			hover = i;
			redraw();
		}
		describe(hover);
	}

	canvas.addEventListener('mousemove', pointAt);
	canvas.addEventListener('mouseleave', () => {
		mouse = null;
		hover = -1;
		describe(-1);
		redraw();
	});
	canvas.addEventListener('click', (e) => {
		pointAt(e);
		if (hover >= 0 && hover !== state.zoom) go({ ...state, zoom: hover }, 'push');
	});
	scroller.addEventListener('scroll', () => {
		if (mouse) {
			const r = canvas.getBoundingClientRect();
			hover = nodeAt(mouse.x - r.left, mouse.y - r.top);
			describe(hover);
		}
		redraw();
	});
	addEventListener('resize', () => {
		layout();
		redraw();
	});
	addEventListener('hashchange', () => {
		if (currentHash() !== hashOf(state)) go(parseHash(), null);
	});

	const zoomOut = () => state.zoom && go({ ...state, zoom: T.parent[state.zoom] }, 'push');
	$('parent').addEventListener('click', zoomOut);
	$('reset').addEventListener('click', () => go({ ...state, zoom: 0 }, 'push'));
	$('icicle').addEventListener('click', () => go({ ...state, flame: false }, 'replace'));
	$('flame').addEventListener('click', () => go({ ...state, flame: true }, 'replace'));
	$('stage').addEventListener('change', (e) => go({ ...state, stage: Number(e.target.value), zoom: 0 }, 'push'));
	search.addEventListener('input', () => go({ ...state, search: search.value }, 'replace'));
	addEventListener('keydown', (e) => {
		if (e.target === search) {
			if (e.key === 'Escape') {
				if (search.value) go({ ...state, search: '' }, 'replace');
				else search.blur();
			}
			return;
		}
		if (e.ctrlKey || e.metaKey || e.altKey) return;
		if (e.key === '/') {
			e.preventDefault();
			search.focus();
		} else if (e.key === 'Escape') {
			if (state.zoom) go({ ...state, zoom: 0 }, 'push');
			else if (state.search) go({ ...state, search: '' }, 'replace');
		} else if (e.key === 'Backspace') {
			e.preventDefault();
			zoomOut();
		}
	});

	state = parseHash();
	show(null);
})();
