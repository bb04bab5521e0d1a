// Allure 3 configuration (written by `flipgate init`; flipgate's own allurerc.mjs re-exports it):
// `npx allure@3.18.0 generate reports/allure-results --config allurerc.mjs` renders one
// self-contained HTML file, reports/allure-report/index.html.
export default {
  name: "flipgate audit",
  output: "reports/allure-report",
  // carried between local renders: each report appends its run, so every test shows its history
  // (status per run) and the trend charts span successive audits
  historyPath: "reports/allure-history.jsonl",
  plugins: {
    awesome: {
      options: {
        reportName: "flipgate audit",
        singleFile: true,
        groupBy: ["epic", "feature", "story"],
      },
    },
  },
};
