// Allure 3 configuration: the one flipgate ships (and `flipgate init` writes into a project).
export { default } from "./flipgate/templates/allurerc.mjs";
