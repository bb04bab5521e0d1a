// Allure 3 configuration (plain object): one self-contained HTML file in reports/allure-report.
export default {
  name: "flipgate audit",
  output: "reports/allure-report",
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
