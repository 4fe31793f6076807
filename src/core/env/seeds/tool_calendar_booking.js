// @title Kickoff Meeting Scheduler
// @setting tool_use
// @skill multi_step_workflows
// @difficulty hard
// @hint Collect every person's busy times first, then walk the day in half-hour steps looking for a full hour that nobody has blocked. Check room sizes before booking.

// A shared office calendar: find the earliest hour three colleagues all have free, then book a room for it.
class CalendarBookingEnv extends ToolUseEnv {
  static tools = [
    {
      name: 'get_busy',
      description: "One colleague's busy times on the day being planned.",
      parameters: { type: 'object', properties: { person: { type: 'string' } }, required: ['person'] },
    },
    {
      name: 'find_rooms',
      description: 'Meeting rooms that are free for a whole interval, with their capacity.',
      parameters: {
        type: 'object',
        properties: {
          start: { type: 'string', description: 'HH:MM on a half-hour, e.g. "10:30"' },
          duration: { type: 'integer', description: 'minutes, a multiple of 30' },
        },
        required: ['start', 'duration'],
      },
    },
    {
      name: 'book_meeting',
      description: 'Book a meeting in a room and send invitations.',
      parameters: {
        type: 'object',
        properties: {
          title: { type: 'string' },
          start: { type: 'string', description: 'HH:MM' },
          duration: { type: 'integer', description: 'minutes' },
          room: { type: 'string' },
          attendees: { type: 'array', items: { type: 'string' } },
        },
        required: ['title', 'start', 'duration', 'room', 'attendees'],
      },
    },
  ];

  reset() {
    const rnd = (n) => Math.floor(Math.random() * n);
    const names = ['Amara', 'Bruno', 'Chiara', 'Dev', 'Elin', 'Farid', 'Gwen', 'Hugo'];
    this.people = [];
    while (this.people.length < 3) this.people.push(names.splice(rnd(names.length), 1)[0]);
    this.day = ['Monday', 'Tuesday', 'Wednesday', 'Thursday'][rnd(4)];
    // a day is 16 half-hour slots from 09:00; slot 14-15 (16:00-17:00) is kept free so an answer always exists
    const blocks = (first) => {
      const out = [];
      for (let p = first; p < 13; p += 1 + rnd(6)) {
        out.push([p, Math.min(14, p + 1 + rnd(3))]);
        p = out[out.length - 1][1];
      }
      return out;
    };
    this.busy = this.people.map((_, i) => blocks(i === 0 ? 0 : rnd(6)));
    const free = (list, s, e) => list.every(([a, b]) => b <= s || a >= e);
    this.slot = 0;
    while (!this.busy.every((l) => free(l, this.slot, this.slot + 2))) this.slot++;
    const rooms = ['Aspen', 'Birch', 'Cedar', 'Dune'];
    const caps = [2, 4, 6, 12];
    this.rooms = rooms.map((name) => ({ name, capacity: caps.splice(rnd(caps.length), 1)[0], busy: blocks(rnd(8)) }));
    this.rooms.find((r) => r.capacity === 2).busy = [];
    let ok = this.rooms.filter((r) => r.capacity >= 3 && free(r.busy, this.slot, this.slot + 2));
    if (!ok.length) {
      const r = this.rooms.find((x) => x.capacity >= 3);
      r.busy = r.busy.filter(([a, b]) => b <= this.slot || a >= this.slot + 2);
      ok = [r];
    }
    this.room = ok[0].name;
    this.bookings = [];
    const team = this.people.join(', ');
    return this.start(
      `You coordinate a new project at a busy office. Everything happens on ${this.day}, and meetings must fit between 09:00 and 17:00. The team: ${team}.`,
      [
        `What is the earliest start time when ${team} are all free for a full hour? Answer with the time as HH:MM.`,
        'Book a one-hour "Project kickoff" at that time with all three of them, in a room large enough. Answer with the room name.',
      ],
    );
  }

  hhmm(slot) {
    return `${String(9 + Math.floor(slot / 2)).padStart(2, '0')}:${slot % 2 ? '30' : '00'}`;
  }

  parseTime(v, key) {
    const m = typeof v === 'string' ? /^\s*(\d{1,2})[:.h](\d{2})\s*$/i.exec(v) : null;
    if (!m) throw new Error('"' + key + '" must be a time like "10:30"');
    const slot = (Number(m[1]) * 60 + Number(m[2]) - 540) / 30;
    if (!Number.isInteger(slot) || slot < 0 || slot > 15)
      throw new Error('"' + key + '" must be on a half-hour between 09:00 and 16:30');
    return slot;
  }

  span(args) {
    const s = this.parseTime(args.start, 'start');
    const d = Number(args.duration);
    if (!Number.isInteger(d) || d <= 0 || d % 30)
      throw new Error('"duration" must be a positive multiple of 30 minutes');
    if (s + d / 30 > 16) throw new Error('the meeting would run past 17:00');
    return [s, s + d / 30];
  }

  person(v) {
    const p = typeof v === 'string' ? this.people.find((x) => x.toLowerCase() === v.trim().toLowerCase()) : null;
    if (!p) throw new Error('unknown colleague ' + JSON.stringify(v) + '; the team is ' + this.people.join(', '));
    return this.people.indexOf(p);
  }

  range([a, b]) {
    return `${this.hhmm(a)}-${this.hhmm(b)}`;
  }

  clash(list, s, e) {
    return list.find(([a, b]) => !(b <= s || a >= e));
  }

  get_busy(args) {
    const i = this.person(args.person);
    const list = this.busy[i].slice().sort((x, y) => x[0] - y[0]);
    return `${this.people[i]} on ${this.day}: busy ${list.map((b) => this.range(b)).join(', ')}`;
  }

  find_rooms(args) {
    const [s, e] = this.span(args);
    const ok = this.rooms.filter((r) => !this.clash(r.busy, s, e)).map((r) => ({ room: r.name, capacity: r.capacity }));
    return ok.length ? ok : 'No room is free for the whole interval.';
  }

  book_meeting(args) {
    if (typeof args.title !== 'string' || !args.title.trim()) throw new Error('"title" must be a non-empty string');
    const [s, e] = this.span(args);
    const room = this.rooms.find(
      (r) => typeof args.room === 'string' && r.name.toLowerCase() === args.room.trim().toLowerCase(),
    );
    if (!room) throw new Error('unknown room; rooms are ' + this.rooms.map((r) => r.name).join(', '));
    if (!Array.isArray(args.attendees) || !args.attendees.length)
      throw new Error('"attendees" must be a list of names');
    const who = [...new Set(args.attendees.map((a) => this.person(a)))];
    for (const i of who) {
      const c = this.clash(this.busy[i], s, e);
      if (c) throw new Error(`${this.people[i]} is busy ${this.range(c)}`);
    }
    const c = this.clash(room.busy, s, e);
    if (c) throw new Error(`${room.name} is booked ${this.range(c)}`);
    if (room.capacity < who.length) throw new Error(room.name + ' holds only ' + room.capacity + ' people');
    room.busy.push([s, e]);
    for (const i of who) this.busy[i].push([s, e]);
    this.bookings.push({ s, e, room: room.name, who: who.length });
    return `Booked "${args.title.trim()}" in ${room.name}, ${this.range([s, e])}. Invitations sent.`;
  }

  checkAnswer(answer, stage) {
    if (stage === 0) {
      try {
        return this.parseTime(answer, 'answer') === this.slot;
      } catch {
        return false;
      }
    }
    const name = answer.trim().toLowerCase();
    return this.bookings.some(
      (b) => b.s === this.slot && b.e === this.slot + 2 && b.who === 3 && b.room.toLowerCase() === name,
    );
  }

  solution() {
    const call = (name, args) => '<tool_call>' + JSON.stringify({ name, arguments: args }) + '</tool_call>';
    const t = this.hhmm(this.slot);
    return [
      ...this.people.map((p) => call('get_busy', { person: p })),
      '<answer>' + t + '</answer>',
      call('find_rooms', { start: t, duration: 60 }),
      call('book_meeting', {
        title: 'Project kickoff',
        start: t,
        duration: 60,
        room: this.room,
        attendees: this.people,
      }),
      '<answer>' + this.room + '</answer>',
    ];
  }
}
