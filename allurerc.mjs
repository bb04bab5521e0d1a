// Allure 3 configuration (plain object): one self-contained HTML file in reports/allure-report.
export default {
  name: "flipgate audit",
  output: "reports/allure-report",
  // carried between `make audit` runs: each report appends its run, so every test shows its history
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
