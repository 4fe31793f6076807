// @title Lamplight Library Catalogue
// @setting tool_use
// @skill data_retrieval
// @difficulty medium
// @hint Search results come a few at a time: keep asking for the next page until there is none, and check the author field of every hit.

// A paged library catalogue: count one author's books, then dig up the call number of the oldest.
class LibraryCatalogueEnv extends ToolUseEnv {
  static tools = [
    {
      name: 'search_catalogue',
      description:
        'Search titles and authors (case-insensitive substring). Returns 3 hits (id, title, author, year) per page.',
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string', description: 'text to look for in titles and author names' },
          page: { type: 'integer', description: 'page number, starting at 1 (default 1)' },
        },
        required: ['query'],
      },
    },
    {
      name: 'get_book',
      description: 'Full record of one book: year, call number, shelf and copies on the shelf.',
      parameters: {
        type: 'object',
        properties: { book_id: { type: 'string', description: 'an id such as "B123" from the search results' } },
        required: ['book_id'],
      },
    },
  ];

  reset() {
    const pick = (list) => list.splice(Math.floor(Math.random() * list.length), 1)[0];
    const firsts = ['Ines', 'Tomas', 'Greta', 'Oskar', 'Mira', 'Felix', 'Nadia', 'Rufus', 'Yara', 'Elias'];
    const lasts = ['Marlow', 'Quill', 'Ashby', 'Fenwick', 'Thorne', 'Vale', 'Hollis', 'Brandt', 'Okafor', 'Lindqvist'];
    const adjs = ['Silent', 'Copper', 'Hidden', 'Winter', 'Crooked', 'Lost', 'Burning', 'Hollow', 'Velvet', 'Distant'];
    const nouns = [
      'Harbour',
      'Orchard',
      'Lantern',
      'Meridian',
      'Garden',
      'Bridge',
      'Archive',
      'Tide',
      'Compass',
      'Forest',
    ];
    const authors = [];
    for (let i = 0; i < 4; i++) authors.push(pick(firsts) + ' ' + pick(lasts));
    this.author = authors[0];
    this.count = 4 + Math.floor(Math.random() * 3);
    const ids = new Set();
    const books = [];
    const years = new Set();
    const add = (author, title) => {
      let id, year;
      do id = 'B' + (100 + Math.floor(Math.random() * 900));
      while (ids.has(id));
      do year = 1950 + Math.floor(Math.random() * 70);
      while (years.has(year));
      ids.add(id);
      years.add(year);
      const dewey = (800 + Math.floor(Math.random() * 100)).toString() + '.' + Math.floor(Math.random() * 90 + 10);
      const call = dewey + ' ' + author.split(' ')[1].slice(0, 3).toUpperCase();
      books.push({ id, title, author, year, call_number: call, shelf: 'Aisle ' + (1 + Math.floor(Math.random() * 9)) });
    };
    const titles = () =>
      'The ' + adjs[Math.floor(Math.random() * adjs.length)] + ' ' + nouns[Math.floor(Math.random() * nouns.length)];
    for (let i = 0; i < this.count; i++) add(this.author, titles());
    // a decoy whose title mentions the author's surname, and books by other people
    add(authors[1], 'The ' + this.author.split(' ')[1] + ' Affair');
    for (let i = 0; i < 7; i++) add(authors[1 + (i % 3)], titles());
    for (let i = books.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [books[i], books[j]] = [books[j], books[i]];
    }
    for (const b of books) b.copies = 1 + Math.floor(Math.random() * 3);
    this.books = books;
    const own = books.filter((b) => b.author === this.author);
    this.oldest = own.reduce((a, b) => (b.year < a.year ? b : a));
    return this.start(
      'You volunteer at the Lamplight Library. A patron is writing an essay on the novelist ' +
        this.author +
        ' and needs help with the catalogue, which only shows a few results at a time.',
      [
        'How many books by ' + this.author + ' does the library hold? Answer with a number.',
        'Which of those is the oldest (earliest year)? Answer with its call number.',
      ],
    );
  }

  search_catalogue(args) {
    if (typeof args.query !== 'string' || args.query.trim().length < 2)
      throw new Error('"query" must be a string of at least 2 characters');
    const page = args.page === undefined ? 1 : Number(args.page);
    if (!Number.isInteger(page) || page < 1) throw new Error('"page" must be a whole number starting at 1');
    const q = args.query.trim().toLowerCase();
    const hits = this.books.filter((b) => b.title.toLowerCase().includes(q) || b.author.toLowerCase().includes(q));
    const pages = Math.max(1, Math.ceil(hits.length / 3));
    if (page > pages) throw new Error('page ' + page + ' is past the last page of results');
    return {
      page,
      results: hits
        .slice((page - 1) * 3, page * 3)
        .map((b) => ({ book_id: b.id, title: b.title, author: b.author, year: b.year })),
      next_page: page < pages ? page + 1 : null,
    };
  }

  get_book(args) {
    const id = typeof args.book_id === 'string' ? args.book_id.trim().toUpperCase() : '';
    if (!id) throw new Error('"book_id" must be a string such as "B123"');
    const b = this.books.find((x) => x.id === id);
    if (!b) throw new Error('no book with id ' + id + '; ids come from search_catalogue');
    return {
      book_id: b.id,
      title: b.title,
      author: b.author,
      year: b.year,
      call_number: b.call_number,
      shelf: b.shelf,
      copies_on_shelf: b.copies,
    };
  }

  checkAnswer(answer, stage) {
    if (stage === 0) {
      const m = /-?\d+/.exec(answer);
      return m !== null && Number(m[0]) === this.count;
    }
    const norm = (s) => s.toLowerCase().replace(/[^a-z0-9.]/g, '');
    return norm(answer) === norm(this.oldest.call_number);
  }

  solution() {
    const call = (name, args) => '<tool_call>' + JSON.stringify({ name, arguments: args }) + '</tool_call>';
    const out = [];
    const pages = Math.ceil(this.count / 3);
    for (let p = 1; p <= pages; p++) out.push(call('search_catalogue', { query: this.author, page: p }));
    out.push('<answer>' + this.count + '</answer>');
    out.push(call('get_book', { book_id: this.oldest.id }));
    out.push('<answer>' + this.oldest.call_number + '</answer>');
    return out;
  }
}
