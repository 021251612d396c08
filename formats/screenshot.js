// Open a file in speedscope's own page (its npm package's index.html) in headless
// Chromium, as a user's "Browse" would, and save a screenshot of what it shows.
// Prints {"title", "errors"} as JSON: the page's title and the errors the page raised.
//   node screenshot.js PAGE_URL FILE PICTURE
const { chromium } = require('playwright-core');

(async () => {
  const [pageUrl, file, picture] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    // (without the background-networking flags, Chromium tries hosts this machine cannot reach)
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  await page.goto(pageUrl);
  await page.setInputFiles('input[type=file]', file);
  await page.waitForFunction(() => document.title !== 'speedscope', null, { timeout: 30000 });
  await page.waitForTimeout(1000);  // (the flame chart is drawn on the next frames)
  await page.screenshot({ path: picture });
  console.log(JSON.stringify({ title: await page.title(), errors }));
  await browser.close();
})().catch((error) => { console.error(String(error)); process.exit(1); });
