// @title Server Room File Hunt
// @setting tool_use
// @skill tool_selection
// @difficulty medium
// @hint Opening files one by one is slow; a search across a whole folder finds a setting or a log line in one call. Read the README for how config files combine.

// A small read-only server file system: find a service's effective port, then the service whose log reports a full disk.
class FileDetectiveEnv extends ToolUseEnv {
  static tools = [
    {
      name: 'ls',
      description: 'List the entries of a directory.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
    {
      name: 'cat',
      description: 'Print the whole content of one file.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
    {
      name: 'grep',
      description: 'Search every file under a path (recursively) for lines containing a text, case-insensitive.',
      parameters: {
        type: 'object',
        properties: {
          pattern: { type: 'string' },
          path: { type: 'string', description: 'file or directory, e.g. "/srv"' },
        },
        required: ['pattern', 'path'],
      },
    },
    {
      name: 'find',
      description: 'List file paths under a directory whose file name contains a text.',
      parameters: {
        type: 'object',
        properties: { name: { type: 'string' }, path: { type: 'string' } },
        required: ['name', 'path'],
      },
    },
  ];

  reset() {
    const rnd = (n) => Math.floor(Math.random() * n);
    const all = ['payments', 'search', 'auth', 'mailer', 'billing', 'images', 'reports', 'gateway'];
    const svcs = [];
    while (svcs.length < 5) svcs.push(all.splice(rnd(all.length), 1)[0]);
    this.target = svcs[rnd(5)];
    this.full = svcs[rnd(5)];
    const files = {};
    const ports = new Set();
    const port = () => {
      let p;
      do p = 8000 + rnd(90) * 10;
      while (ports.has(p));
      ports.add(p);
      return p;
    };
    const msgs = ['worker started', 'health check ok', 'cache warmed', 'request took 412 ms', 'config reloaded'];
    for (const s of svcs) {
      const d = '/srv/' + s;
      files[d + '/README.md'] =
        '# ' +
        s +
        '\nConfig lives in conf.d/. Files there are applied in name order; a later file overrides earlier ones.';
      files[d + '/conf.d/10-base.conf'] =
        'name = ' + s + '\nport = ' + port() + '\nworkers = ' + (2 + rnd(6)) + '\nexport_dir = /var/' + s;
      if (s === this.target ? rnd(3) > 0 : rnd(2))
        files[d + '/conf.d/50-local.conf'] = '# local override\nport = ' + port();
      files[d + '/conf.d/30-limits.conf'] = 'max_body_kb = ' + 64 * (1 + rnd(8)) + '\ntimeout_s = ' + (5 + rnd(25));
      const log = [];
      for (let i = 0; i < 4; i++) log.push('INFO ' + msgs[rnd(msgs.length)]);
      if (s === this.full) log.splice(1 + rnd(3), 0, 'ERROR write failed: disk quota exceeded');
      else log.push('WARN slow upstream response');
      log.forEach((line, i) => (log[i] = '09:' + (12 + i * 9) + ' ' + line));
      files[d + '/logs/app.log'] = log.join('\n');
    }
    this.files = files;
    const conf = '/srv/' + this.target + '/conf.d/';
    this.port = Number(/port = (\d+)/.exec(files[conf + '50-local.conf'] || files[conf + '10-base.conf'])[1]);
    return this.start(
      'You are on call for a small company and have read-only shell access to its server. Every service keeps its files under /srv/<service>/.',
      [
        'On which port does the ' + this.target + ' service actually listen? Answer with the port number.',
        'One service has logged a "disk quota exceeded" error. Which service? Answer with its name.',
      ],
    );
  }

  clean(p, key) {
    if (typeof p !== 'string' || !p.trim()) throw new Error('"' + key + '" must be a path string such as "/srv"');
    let s = p.trim().replace(/\/+$/, '');
    if (!s.startsWith('/')) s = '/' + s;
    return s || '/';
  }

  under(dir) {
    const pre = dir === '/' ? '/' : dir + '/';
    return Object.keys(this.files)
      .filter((f) => f === dir || f.startsWith(pre))
      .sort();
  }

  ls(args) {
    const dir = this.clean(args.path, 'path');
    if (this.files[dir] !== undefined) return dir;
    const pre = dir === '/' ? '/' : dir + '/';
    const names = new Set(
      this.under(dir).map((f) => f.slice(pre.length).split('/')[0] + (f.slice(pre.length).includes('/') ? '/' : '')),
    );
    if (!names.size) throw new Error('ls: ' + dir + ': no such file or directory');
    return [...names].sort().join('  ');
  }

  cat(args) {
    const p = this.clean(args.path, 'path');
    if (this.files[p] !== undefined) return this.files[p];
    if (this.under(p).length) throw new Error('cat: ' + p + ': is a directory');
    throw new Error('cat: ' + p + ': no such file');
  }

  grep(args) {
    if (typeof args.pattern !== 'string' || !args.pattern) throw new Error('"pattern" must be a non-empty string');
    const dir = this.clean(args.path, 'path');
    const q = args.pattern.toLowerCase();
    const hits = [];
    for (const f of this.under(dir))
      this.files[f].split('\n').forEach((line, i) => {
        if (line.toLowerCase().includes(q)) hits.push(f + ':' + (i + 1) + ': ' + line);
      });
    if (!this.under(dir).length) throw new Error('grep: ' + dir + ': no such file or directory');
    if (!hits.length) return '(no matches)';
    return hits.slice(0, 20).join('\n') + (hits.length > 20 ? '\n... ' + (hits.length - 20) + ' more matches' : '');
  }

  find(args) {
    if (typeof args.name !== 'string' || !args.name) throw new Error('"name" must be a non-empty string');
    const dir = this.clean(args.path === undefined ? '/' : args.path, 'path');
    const q = args.name.toLowerCase();
    const hits = this.under(dir).filter((f) => f.split('/').pop().toLowerCase().includes(q));
    return hits.length ? hits.slice(0, 25).join('\n') : '(nothing found)';
  }

  checkAnswer(answer, stage) {
    if (stage === 0) {
      const m = /\d+/.exec(answer);
      return m !== null && Number(m[0]) === this.port;
    }
    return answer.toLowerCase().replace(/[^a-z]/g, '') === this.full;
  }

  solution() {
    const call = (name, args) => '<tool_call>' + JSON.stringify({ name, arguments: args }) + '</tool_call>';
    return [
      call('grep', { pattern: 'port', path: '/srv/' + this.target + '/conf.d' }),
      '<answer>' + this.port + '</answer>',
      call('grep', { pattern: 'quota', path: '/srv' }),
      '<answer>' + this.full + '</answer>',
    ];
  }
}
